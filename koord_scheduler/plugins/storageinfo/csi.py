"""CSI migration facts from kube-scheduler (``nodevolumelimits/utils.go`` ``isCSIMigrationOn``,
``volumebinding/binder.go`` ``isCSIMigrationOnForPlugin``) and csi-translation-lib's plugin names.

The in-tree AWS EBS, GCE PD, Azure Disk and Cinder plugins are migrated to CSI (GA); Portworx only with
its feature gate, which pykoord treats as off. kube-scheduler's volume limits count a migrated in-tree
volume against the CSI driver's limit when a CSINode exists for the node.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.core.storage import CSINode

GCE_PD = "kubernetes.io/gce-pd"
AWS_EBS = "kubernetes.io/aws-ebs"
AZURE_DISK = "kubernetes.io/azure-disk"
CINDER = "kubernetes.io/cinder"
PORTWORX = "kubernetes.io/portworx-volume"
AZURE_FILE = "kubernetes.io/azure-file"
VSPHERE = "kubernetes.io/vsphere-volume"

CSI_DRIVER_OF: Mapping[str, str] = {
    GCE_PD: "pd.csi.storage.gke.io",
    AWS_EBS: "ebs.csi.aws.com",
    AZURE_DISK: "disk.csi.azure.com",
    CINDER: "cinder.csi.openstack.org",
    PORTWORX: "pxd.portworx.com",
    AZURE_FILE: "file.csi.azure.com",
    VSPHERE: "csi.vsphere.vmware.com",
}
"""In-tree plugin name -> the CSI driver csi-translation-lib migrates it to."""

_MIGRATED = frozenset({GCE_PD, AWS_EBS, AZURE_DISK, CINDER})


def csi_migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    """``isCSIMigrationOn``: a CSINode exists for the node and the plugin's migration is on."""
    return csi_node is not None and plugin in _MIGRATED
