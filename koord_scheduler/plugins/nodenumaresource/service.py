"""NodeNUMAResource's debug endpoint (Koordinator ``nodenumaresource/service.go``):

``GET /apis/v1/plugins/NodeNUMAResource/nodes/:nodeName``: the node's ``NodeResponse``: its CPU topology
(``cpuTopology`` with ``cpuDetails`` by CPU id), reserved CPUs, NUMA topology policy and per-NUMA-node
allocatable (``numaNodeResources``), what bound and assumed pods hold (``allocatedPods``, ``allocatedCPUs``
with each CPU's ``refCount`` and exclusive policy, ``allocatedNUMANodeResources``) and what is left
(``availableCPUs``, ``remainingNUMANodeResources``). Errors are Koordinator's: 500 ``node "x" not found``,
500 ``invalid topology, please check the NodeResourceTopology object``.

CPU sets are written as cpuset strings (``0-3,8``): Koordinator's ``cpuset.CPUSet`` has no JSON encoding of
its own and comes out as ``{}``. ``simulate``'s cpuset table shows the same ``allocatedPods``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from apis.extension.numa import CPUExclusivePolicy, format_cpuset
from koord_scheduler.framework.services import ApiReply, ApiRoute, ok, resource_list
from koord_scheduler.plugins.nodenumaresource.cache import NodeAllocations
from koord_scheduler.plugins.nodenumaresource.nrt import NodeTopologyRecord
from koord_scheduler.plugins.nodenumaresource.topology import CPUTopology

if TYPE_CHECKING:
    from koord_scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource

MAX_REF_COUNT = 1
"""CPUs are shared by no two cpuset pods (Koordinator's ``maxRefCount`` without a kubelet policy)."""


def cpu_details(
    topology: CPUTopology, cpus: Sequence[int], refs: Mapping[int, int], exclusive: Mapping[int, CPUExclusivePolicy]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cpu in sorted(cpus):
        info = topology.cpus[cpu]
        out[str(cpu)] = {
            "cpuID": cpu,
            "coreID": info.core & 0xFFFF,  # the NRT's core id (pykoord keys cores by socket << 16 | core)
            "nodeID": info.node,
            "socketID": info.socket,
            "refCount": refs.get(cpu, 0),
            "exclusivePolicy": str(exclusive.get(cpu, CPUExclusivePolicy.NONE)),
        }
    return out


def _numa_list(per_node: Mapping[int, Mapping[str, int]]) -> list[dict[str, Any]]:
    return [{"node": n, "resources": resource_list(per_node[n])} for n in sorted(per_node)]


def node_response(record: NodeTopologyRecord, allocations: NodeAllocations) -> dict[str, Any]:
    """Koordinator's ``NodeResponse`` for the node of ``record``."""
    topology = record.topology
    name = record.name
    refs: dict[int, int] = {}
    pods: list[dict[str, Any]] = []
    for node, key, cpus in allocations.rows():
        if node != name:
            continue
        holding = allocations.holding(node, key)
        for cpu in cpus:
            refs[cpu] = refs.get(cpu, 0) + 1
        namespace, _, pod_name = key.rpartition("/")
        pod: dict[str, Any] = {"namespace": namespace, "name": pod_name}
        if cpus:
            pod["cpuset"] = format_cpuset(cpus)
        if holding is not None and holding.exclusive is not CPUExclusivePolicy.NONE:
            pod["cpuExclusivePolicy"] = str(holding.exclusive)
        if holding is not None and holding.numa:
            pod["numaNodeResources"] = _numa_list(holding.numa)
        pods.append(pod)
    taken, exclusive = allocations.taken(name)
    allocated_numa = allocations.numa_allocated(name)
    remaining = {
        n: {k: max(v - allocated_numa.get(n, {}).get(k, 0), 0) for k, v in amounts.items()}
        for n, amounts in record.numa_resources.items()
    }
    available = [c for c in topology.cpus if c not in taken and c not in record.reserved]
    return {
        "name": name,
        "cpuTopology": {
            "numCPUs": topology.num_cpus,
            "numCores": topology.num_cores,
            "numNodes": topology.num_nodes,
            "numSockets": topology.num_sockets,
            "cpuDetails": cpu_details(topology, list(topology.cpus), {}, {}),
        },
        "reservedCPUs": format_cpuset(record.reserved),
        "maxRefCount": MAX_REF_COUNT,
        "numaTopologyPolicy": str(record.numa_policy),
        "numaNodeResources": _numa_list(record.numa_resources),
        "remainingNUMANodeResources": _numa_list(remaining),
        "allocatedNUMANodeResources": _numa_list(allocated_numa),
        "availableCPUs": format_cpuset(frozenset(available)),
        "allocatedCPUs": cpu_details(topology, sorted(taken), refs, exclusive),
        "allocatedPods": pods,
    }


def routes(plugin: NodeNUMAResource) -> Sequence[ApiRoute]:
    def node(params: Mapping[str, str], _: Mapping[str, str]) -> ApiReply:
        name = params["nodeName"]
        if plugin.snapshot.node_info(name) is None:
            return 500, {"message": f'node "{name}" not found'}
        record = plugin.topology_of(name)
        if record is None or not record.topology.valid:
            return 500, {"message": "invalid topology, please check the NodeResourceTopology object"}
        return ok(node_response(record, plugin.allocations))

    return (ApiRoute("/nodes/:nodeName", node),)
