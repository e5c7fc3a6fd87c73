"""A test provisioner, as a CSI external-provisioner behaves for a topology-aware driver.

It watches PersistentVolumeClaims cluster-wide and, for each unbound claim that the PersistentVolume
controller handed to it (``volume.kubernetes.io/storage-provisioner: <name>``) and that the scheduler
annotated with ``volume.kubernetes.io/selected-node``, creates a PersistentVolume of the requested size,
class and access modes, pre-bound to the claim (``claimRef`` with its uid) and pinned to the selected
node by ``kubernetes.io/hostname``. The PersistentVolume controller then binds the two.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.request
from typing import Any

from controlplane import ControlPlane

SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"


class TestProvisioner:
    __test__ = False  # not a pytest class

    def __init__(self, plane: ControlPlane, name: str) -> None:
        self.plane = plane
        self.name = name
        self.provisioned: dict[str, str] = {}
        """``namespace/claim`` -> node the volume was created for."""
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"provisioner-{name}")

    def __enter__(self) -> TestProvisioner:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        listing = self.plane.request("GET", "/api/v1/persistentvolumeclaims").json()
        for claim in listing["items"]:
            self._handle(claim)
        rv = listing["metadata"]["resourceVersion"]
        context = ssl.create_default_context(cafile=str(self.plane.ca_file))
        while not self._stop.is_set():
            path = f"/api/v1/persistentvolumeclaims?watch=1&resourceVersion={rv}&timeoutSeconds=5"
            request = urllib.request.Request(
                self.plane.server + path, headers={"Authorization": f"Bearer {self.plane.token}"}
            )
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as resp:
                    self._ready.set()
                    for line in resp:
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            break
                        rv = event["object"]["metadata"]["resourceVersion"]
                        if event["type"] != "DELETED":
                            self._handle(event["object"])
            except (OSError, ValueError):
                time.sleep(0.5)

    def _handle(self, claim: dict[str, Any]) -> None:
        meta = claim["metadata"]
        annotations = meta.get("annotations") or {}
        node = annotations.get(SELECTED_NODE)
        key = f"{meta['namespace']}/{meta['name']}"
        if claim["spec"].get("volumeName") or not node or annotations.get(STORAGE_PROVISIONER) != self.name:
            return
        if self.provisioned.get(key) == node:
            return
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"pvc-{meta['uid']}",
                "annotations": {"pv.kubernetes.io/provisioned-by": self.name},
            },
            "spec": {
                "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                "accessModes": claim["spec"]["accessModes"],
                "storageClassName": claim["spec"]["storageClassName"],
                "persistentVolumeReclaimPolicy": "Delete",
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "csi": {"driver": self.name, "volumeHandle": f"vol-{meta['uid']}"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
        result = self.plane.request("POST", "/api/v1/persistentvolumes", volume)
        if result.status < 300 or result.status == 409:
            self.provisioned[key] = node
        else:
            self.errors.append(f"{key}: {result.status} {result.body[:200]!r}")
