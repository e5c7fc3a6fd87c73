"""koordlet's NodeResourceTopology writer against the real API server, through kubeapi on an ``ApiLoop``:
created owned by the Node, left alone while nothing managed changed, updated when a managed field changes
(keeping what others wrote: another annotation, the batch resources of a zone), and a write that lost a
race is a 409 for the caller to retry from a fresh read."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from test_koordlet_topology import GROUP, PLURAL, VERSION, install_crd

from koordlet.statesinformer.apiloop import ApiLoop
from koordlet.statesinformer.nodetopology import MANAGED_ANNOTATIONS, build_node_resource_topology
from koordlet.statesinformer.topology_writer import KubeTopologyWriter
from kubeapi.connection import load_connection
from kubeapi.http import ApiError

pytestmark = pytest.mark.integration


@pytest.fixture
def api_loop(control_plane: Any) -> Iterator[ApiLoop]:
    loop = ApiLoop(load_connection(str(control_plane.kubeconfig)))
    yield loop
    loop.stop()


def desired(node: str, uid: str, *, pools: str) -> dict[str, Any]:
    annotations = {key: "{}" for key in MANAGED_ANNOTATIONS}
    annotations["node.koordinator.sh/cpu-shared-pools"] = json.dumps([{"socket": 0, "node": 0, "cpuset": pools}])
    zones = [
        {
            "name": "node-0",
            "type": "Node",
            "resources": [{"name": "cpu", "capacity": "4", "allocatable": "4", "available": "4"}],
        }
    ]
    return build_node_resource_topology(node, uid, annotations=annotations, zones=zones)


def test_created_then_updated_keeping_what_others_wrote(control_plane: Any, api_loop: ApiLoop) -> None:
    with control_plane.api_client() as api:
        install_crd(api)
    node = f"nrtw-{uuid.uuid4().hex[:6]}"
    created = control_plane.request(
        "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
    )
    assert created.status == 201
    node_uid = json.loads(created.body)["metadata"]["uid"]
    path = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{node}"
    writer = KubeTopologyWriter(api_loop, node)

    assert writer.write(desired(node, node_uid, pools="0-3")) is True
    obj = json.loads(control_plane.request("GET", path).body)
    assert obj["metadata"]["ownerReferences"][0]["uid"] == node_uid
    assert json.loads(obj["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"])[0]["cpuset"] == "0-3"
    first_version = obj["metadata"]["resourceVersion"]
    assert writer.write(desired(node, node_uid, pools="0-3")) is False  # nothing managed changed: no write
    assert json.loads(control_plane.request("GET", path).body)["metadata"]["resourceVersion"] == first_version

    # Someone else adds an annotation and a batch resource to the zone: kept through the next update.
    obj["metadata"]["annotations"]["example.com/other"] = "kept"
    obj["zones"][0]["resources"].append(
        {"name": "kubernetes.io/batch-cpu", "capacity": "2", "allocatable": "2", "available": "2"}
    )
    assert control_plane.request("PUT", path, obj).status == 200
    assert writer.write(desired(node, node_uid, pools="0-1")) is True
    updated = json.loads(control_plane.request("GET", path).body)
    annotations = updated["metadata"]["annotations"]
    assert json.loads(annotations["node.koordinator.sh/cpu-shared-pools"])[0]["cpuset"] == "0-1"
    assert annotations["example.com/other"] == "kept"
    assert [r["name"] for r in updated["zones"][0]["resources"]] == ["cpu", "kubernetes.io/batch-cpu"]

    # A write from a stale read (``obj``, two versions old) loses the race: the PUT carries the read's
    # resourceVersion, so the server answers 409, raised for the caller (the plugin retries next tick).
    writer._get = lambda: obj  # type: ignore[method-assign]
    with pytest.raises(ApiError) as err:
        writer.write(desired(node, node_uid, pools="0-2"))
    assert err.value.conflict
    left = json.loads(control_plane.request("GET", path).body)["metadata"]["annotations"]
    assert json.loads(left["node.koordinator.sh/cpu-shared-pools"])[0]["cpuset"] == "0-1"
    control_plane.request("DELETE", path)
    control_plane.request("DELETE", f"/api/v1/nodes/{node}")
