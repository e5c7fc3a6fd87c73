"""Reservation's debug endpoints (Koordinator ``reservation/service.go``):

- ``GET /apis/v1/plugins/Reservation/nodeReservations/:nodeName``: ``{"items": [...]}``, one
  ``ReservationItem`` per Available reservation on the node (``{"items": []}`` for none): what it reserves
  (``allocatable``), what its owners hold of that (``allocated``), the rest (``availableResource``), its
  host ports, owner terms, allocate policy and the owner pods it holds (``assignedPods``);
- ``GET /apis/v1/plugins/Reservation/reservationSelectorIndex[?detail=true]``: the
  ``reservationSelectorIndex`` view: enabled, configured prefixes and keys, and per bucket how many nodes
  and reservations it holds (``detail=true`` adds the reservation UIDs per node).

The numbers are the plugin's cache, the one ``simulate``'s reservation table prints (``allocatable``,
``allocated``). ``availableResource`` / ``allocatedResource`` use Go's ``framework.Resource`` field names
(``MilliCPU``, ``Memory``...). Owner pods in ``assignedPods`` carry namespace, name, UID and requests
(pykoord keeps no host ports per owner, so ``Ports`` is empty). pykoord keeps no separate inverted index
(see :mod:`.selector_index`): its view is computed from the placed reservations' labels, as the index
would hold them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from apis.core.types import LabelSelector
from apis.scheduling.record import OwnerTerm
from koord_scheduler.framework.services import (
    ApiReply,
    ApiRoute,
    framework_resource,
    ok,
    query_flag,
    resource_list,
)
from koord_scheduler.plugins.reservation.cache import ReservationCache, ReservationEntry
from koord_scheduler.plugins.reservation.selector_index import SelectorIndex

if TYPE_CHECKING:
    from koord_scheduler.plugins.reservation.plugin import Reservation


def label_selector(selector: LabelSelector) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if selector.match_labels:
        out["matchLabels"] = dict(sorted(selector.match_labels.items()))
    if selector.match_expressions:
        out["matchExpressions"] = [
            {"key": r.key, "operator": str(r.operator), **({"values": list(r.values)} if r.values else {})}
            for r in selector.match_expressions
        ]
    return out


def owner_term(term: OwnerTerm) -> dict[str, Any]:
    """``ReservationOwner`` JSON: ``object``, ``controller`` (an OwnerReference plus namespace),
    ``labelSelector``; empty strings left out."""
    out: dict[str, Any] = {}
    if term.has_object:
        obj = {"namespace": term.object_namespace, "name": term.object_name, "uid": term.object_uid}
        out["object"] = {k: v for k, v in obj.items() if v}
    if term.has_controller:
        ctrl: dict[str, Any] = {
            "apiVersion": term.controller_api_version,
            "kind": term.controller_kind,
            "name": term.controller_name,
            "uid": term.controller_uid,
        }
        ctrl = {k: v for k, v in ctrl.items() if v}
        if term.controller_only:
            ctrl["controller"] = True
        if term.controller_namespace:
            ctrl["namespace"] = term.controller_namespace
        out["controller"] = ctrl
    if term.label_selector is not None:
        out["labelSelector"] = label_selector(term.label_selector)
    return out


def reservation_item(entry: ReservationEntry) -> dict[str, Any]:
    """Koordinator's ``ReservationItem`` (``omitempty`` fields left out when empty)."""
    record = entry.record
    allocatable = dict(entry.allocatable)
    allocated = entry.allocated()
    available = entry.remainder()
    ports: dict[str, list[dict[str, Any]]] = {}
    for hp in entry.reserve_pod.host_ports:
        ports.setdefault(hp.host_ip, []).append({"Protocol": hp.protocol, "Port": hp.port})
    item: dict[str, Any] = {"name": record.name}
    if record.uid:
        item["uid"] = record.uid
    item["kind"] = "Reservation"
    if record.is_available and not entry.exhausted:
        item["available"] = True
    if record.allocate_once:
        item["allocateOnce"] = True
    if allocatable:
        item["allocatable"] = resource_list(allocatable)
    if allocated:
        item["allocated"] = resource_list(allocated)
    if ports:
        item["allocatablePorts"] = ports
    item["availableResource"] = framework_resource(available)
    item["allocatedResource"] = framework_resource(allocated)
    owners = [owner_term(t) for t in record.owners]
    if owners:
        item["owners"] = owners
    if record.allocate_policy:
        item["allocatePolicy"] = record.allocate_policy
    assigned = _assigned_pods(entry)
    if assigned:
        item["assignedPods"] = assigned
    return item


def _assigned_pods(entry: ReservationEntry) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for ns, name, uid in entry.record.current_owners:
        out[f"{ns}/{name}"] = {"Namespace": ns, "Name": name, "UID": uid, "Requests": None, "Ports": None}
    for ref in entry.bound.values():
        if ref.node == entry.record.node_name:
            ns, _, name = ref.key.rpartition("/")
            row = out.setdefault(ref.key, {"Namespace": ns, "Name": name, "UID": "", "Ports": None})
            row["Requests"] = resource_list(ref.requests)
    for key, owner in entry.assumed.items():
        ns, _, name = key.rpartition("/")
        out[key] = {
            "Namespace": ns,
            "Name": name,
            "UID": owner.uid,
            "Requests": resource_list(owner.requests),
            "Ports": None,
        }
    for pid in entry.left:
        for key in [k for k, v in out.items() if pid in (v["UID"], k)]:
            del out[key]
    order = ("Namespace", "Name", "UID", "Requests", "Ports")  # PodRequirement's field order
    return [{f: out[k].get(f) for f in order} for k in sorted(out)]


def node_reservations(cache: ReservationCache, node: str) -> dict[str, Any]:
    entries = [cache.get(uid) for uid in cache.by_node.get(node, ())]
    available = sorted(
        (e for e in entries if e is not None and e.record.is_available and e.record.node_name == node),
        key=lambda e: e.record.name,
    )
    return {"items": [reservation_item(e) for e in available]}


def selector_index_view(index: SelectorIndex | None, cache: ReservationCache, *, detail: bool) -> dict[str, Any]:
    """Koordinator's ``ReservationSelectorIndexSnapshot``, from the placed reservations' labels."""
    if index is None:
        return {"enabled": False, "prefixes": [], "indexedReservations": 0}
    by_prefix: dict[str, dict[str, set[str]]] = {p: {} for p in index.prefixes}
    by_key: dict[str, dict[str, dict[str, set[str]]]] = {}
    indexed: set[str] = set()
    for entry in cache:
        node = entry.record.node_name
        if not node:
            continue
        for key, value in entry.record.labels.items():
            if key in index.keys:
                by_key.setdefault(key, {}).setdefault(value, {}).setdefault(node, set()).add(entry.uid)
                indexed.add(entry.uid)
            prefix = index.matched_prefix(key)
            if prefix:
                by_prefix[prefix].setdefault(node, set()).add(entry.uid)
                indexed.add(entry.uid)
    out: dict[str, Any] = {"enabled": True, "prefixes": list(index.prefixes)}
    if index.keys:
        out["keys"] = sorted(index.keys)
    out["indexedReservations"] = len(indexed)
    out["byPrefix"] = {p: _bucket(nodes, detail) for p, nodes in sorted(by_prefix.items())}
    if by_key:
        merged: dict[str, dict[str, set[str]]] = {}
        for key, values in by_key.items():
            for nodes in values.values():
                for node, uids in nodes.items():
                    merged.setdefault(key, {}).setdefault(node, set()).update(uids)
        out["byKey"] = {k: _bucket(nodes, detail) for k, nodes in sorted(merged.items())}
        if detail:
            out["byKeyValue"] = {
                k: {v: _bucket(nodes, detail) for v, nodes in sorted(values.items())}
                for k, values in sorted(by_key.items())
            }
    return out


def _bucket(nodes: Mapping[str, set[str]], detail: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": len(nodes), "reservations": sum(len(u) for u in nodes.values())}
    if detail:
        out["byNode"] = {n: sorted(u) for n, u in sorted(nodes.items())}
    return out


def routes(plugin: Reservation) -> Sequence[ApiRoute]:
    def on_node(params: Mapping[str, str], _: Mapping[str, str]) -> ApiReply:
        return ok(node_reservations(plugin.cache, params["nodeName"]))

    def index(_: Mapping[str, str], query: Mapping[str, str]) -> ApiReply:
        narrowing = plugin.selector_index
        selector = narrowing.index if narrowing is not None else None
        return ok(selector_index_view(selector, plugin.cache, detail=query_flag(query, "detail")))

    return (ApiRoute("/nodeReservations/:nodeName", on_node), ApiRoute("/reservationSelectorIndex", index))
