"""Writes the node's ``Device`` object (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, named
after the node): created when missing, else merge-patched (labels, annotations such as the GPU partition
table, and ``spec``). Called from a worker thread; each request runs on the :class:`~.apiloop.ApiLoop`."""

from __future__ import annotations

from typing import Any

from apis.core.paths import api_path
from koordlet.statesinformer.apiloop import ApiLoop
from kubeapi.http import MERGE_PATCH, ApiError

GROUP, VERSION, PLURAL = "scheduling.koordinator.sh", "v1alpha1", "devices"


class KubeDeviceWriter:
    def __init__(self, api: ApiLoop) -> None:
        self._api = api

    def write(self, device: dict[str, Any]) -> None:
        name = device["metadata"]["name"]
        metadata = {"labels": device["metadata"].get("labels", {})}
        if device["metadata"].get("annotations"):
            metadata["annotations"] = device["metadata"]["annotations"]
        patch = {"metadata": metadata, "spec": device["spec"]}
        path = api_path(GROUP, VERSION, PLURAL, name=name)
        try:
            self._api.call(lambda http: http.request("PATCH", path, body=patch, content_type=MERGE_PATCH))
            return
        except ApiError as err:
            if not err.not_found:
                raise
        self._api.call(lambda http: http.request("POST", api_path(GROUP, VERSION, PLURAL), body=device))
