"""Writes the node's ``Device`` object (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, named
after the node): created when missing, else merge-patched (labels, annotations such as the GPU partition
table, and ``spec``)."""

from __future__ import annotations

from typing import Any

GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "devices"


class KubeDeviceWriter:
    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._custom = client.CustomObjectsApi(api_client)
        self._exc = client.ApiException

    def write(self, device: dict[str, Any]) -> None:
        name = device["metadata"]["name"]
        metadata = {"labels": device["metadata"].get("labels", {})}
        if device["metadata"].get("annotations"):
            metadata["annotations"] = device["metadata"]["annotations"]
        patch = {"metadata": metadata, "spec": device["spec"]}
        try:
            self._custom.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, patch)
            return
        except self._exc as err:
            if err.status != 404:
                raise
        self._custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, device)
