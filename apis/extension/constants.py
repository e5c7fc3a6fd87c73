"""Label, annotation and resource names Koordinator puts on pods and nodes (``apis/extension/*.go``)."""

from typing import Final

DOMAIN_PREFIX: Final = "koordinator.sh/"
NODE_DOMAIN_PREFIX: Final = "node.koordinator.sh/"

LABEL_POD_QOS: Final = "koordinator.sh/qosClass"
"""Pod label selecting the Koordinator QoS class (LSE, LSR, LS, BE, SYSTEM)."""
LABEL_POD_PRIORITY_CLASS: Final = "koordinator.sh/priority-class"
"""Pod label overriding the priority class derived from ``spec.priority``."""
LABEL_POD_PRIORITY: Final = "koordinator.sh/priority"
"""Pod label carrying the sub-priority (int32) inside a priority class."""

ANNOTATION_NODE_RESERVATION: Final = "node.koordinator.sh/reservation"

RESOURCE_BATCH_CPU: Final = "kubernetes.io/batch-cpu"
"""Reclaimed CPU for koord-batch/free pods, an integer in millicores."""
RESOURCE_BATCH_MEMORY: Final = "kubernetes.io/batch-memory"
RESOURCE_MID_CPU: Final = "kubernetes.io/mid-cpu"
RESOURCE_MID_MEMORY: Final = "kubernetes.io/mid-memory"
