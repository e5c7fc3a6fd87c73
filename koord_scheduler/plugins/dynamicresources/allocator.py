"""The structured-parameters allocator (``k8s.io/dynamic-resource-allocation/structured``, the
"incubating" implementation kube-scheduler v1.35 picks with its default features).

:meth:`Allocator.allocate` answers, for one node, one allocation per claim or ``None``: an exhaustive
depth-first search that takes the first solution, as upstream's ``allocateOne`` does. Claims are
allocated in order, each claim's requests in order, each request's devices one after the other; every
candidate is checked against use (already allocated, in flight, or picked earlier in this search), the
class and request CEL selectors, device taints (``DRADeviceTaints``), and the claim's
``matchAttribute`` constraints. ``firstAvailable`` subrequests are tried in order; ``All`` takes every
matching device of complete pools. Admin access may reuse devices in use.

Errors (:class:`AllocationError`) are problems with a claim or class (a CEL compile or runtime error, a
missing class, an ``All`` request over a pool being updated): they stop the attempt on every node.
:class:`FailedOnNodeError` only concerns this node (its pools are invalid).

Not implemented (behind gates that are off by default in v1.35): partitionable devices (counters),
consumable capacity, binding conditions. With their gates off upstream ignores such devices too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field

from apis.core.types import Node, NodeSelectorTerm, Operator, SelectorRequirement
from apis.resource.types import (
    ALLOCATION_RESULTS_MAX_SIZE,
    CEL_SELECTOR_MAX_COST,
    AllocationMode,
    AllocationResult,
    DeviceClass,
    DeviceConfig,
    DeviceId,
    DeviceResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
)
from koord_scheduler.plugins.dynamicresources.pools import Candidate, NodePoolCache, Pool, node_matches
from koord_scheduler.plugins.dynamicresources.selector_cache import SelectorCache

_MEMO_SIZE = 65_536


class AllocationError(Exception):
    """A problem with a claim or class: allocation cannot proceed on any node."""


class FailedOnNodeError(Exception):
    """Allocation failed on this node only; the message is the node's reason."""


@dataclass(frozen=True, slots=True)
class Features:
    """``structured.Features``: what the allocator may use (from the feature gates)."""

    admin_access: bool = True
    prioritized_list: bool = True
    device_taints: bool = False
    partitionable_devices: bool = False


@dataclass(slots=True)
class _RequestData:
    """One request or subrequest to satisfy."""

    claim_index: int
    request_name: str
    parent_name: str
    sub: DeviceSubRequest
    device_class: DeviceClass
    num_devices: int
    all_devices: list[Candidate] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.parent_name}/{self.request_name}" if self.parent_name else self.request_name


@dataclass(slots=True)
class _Picked:
    candidate: Candidate
    data: _RequestData


class _MatchAttribute:
    """``matchAttributeConstraint``: every device of the named requests shares one attribute value."""

    __slots__ = ("attribute", "count", "requests", "value")

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.value: tuple[object, object] | None = None
        self.count = 0

    def _applies(self, data: _RequestData) -> bool:
        if not self.requests:
            return True
        if data.parent_name:
            return data.parent_name in self.requests or data.full_name in self.requests
        return data.request_name in self.requests

    def add(self, data: _RequestData, candidate: Candidate) -> bool:
        if not self._applies(data):
            return True
        value = _lookup_attribute(candidate, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value = value
        elif value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, data: _RequestData) -> None:
        if self._applies(data):
            self.count -= 1


def _lookup_attribute(candidate: Candidate, qualified: str) -> tuple[object, object] | None:
    attributes = candidate.entry.slice.devices[candidate.index].attributes
    found = attributes.get(qualified)
    if found is None:
        domain, _, name = qualified.partition("/")
        if domain != candidate.device_id.driver:
            return None
        found = attributes.get(name)
    return None if found is None else (found.kind, found.value)


def _tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """``resourceclaim.ToleratesTaint``."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


class Allocator:
    """Allocation for one pod's claims, shared by Filter on every node (upstream builds one per
    PreFilter). ``allocated``: devices in use by other claims, in-flight allocations included;
    ``node_pools``: the pools each node sees (kept by the plugin across cycles)."""

    def __init__(
        self,
        node_pools: NodePoolCache,
        classes: Mapping[str, DeviceClass],
        allocated: Container[DeviceId],
        *,
        features: Features,
        selectors: SelectorCache,
    ) -> None:
        self.node_pools = node_pools
        self.classes = classes
        self.allocated = allocated
        self.features = features
        self.selectors = selectors
        self.cost_limit = CEL_SELECTOR_MAX_COST

    def device_matches(
        self, candidate: Candidate, device_class: DeviceClass, selectors: tuple[str, ...], claim_key: str, node: Node
    ) -> bool:
        """``isSelectable``: the class's then the request's selectors (each CEL result cached on the slice),
        and a per-device node selection. A CEL error raises :class:`AllocationError` naming the class or
        claim and the selector."""
        device = candidate.entry.slice.devices[candidate.index]
        if device.binding_conditions:
            return False  # DRADeviceBindingConditions is off
        result = self._selectors_match(
            candidate, device_class.selectors, lambda i: f"class {device_class.name}: selector #{i}"
        ) and self._selectors_match(candidate, selectors, lambda i: f"claim {claim_key}: selector #{i}")
        if result and candidate.entry.slice.per_device_node_selection:
            result = node_matches(node, device.node_name, device.all_nodes, device.node_selector)
        return result

    def _selectors_match(self, candidate: Candidate, expressions: tuple[str, ...], where: Callable[[int], str]) -> bool:
        entry = candidate.entry
        for i, expression in enumerate(expressions):
            cache_key = (expression, candidate.index)
            outcome = entry.cel_results.get(cache_key)
            if outcome is None:
                outcome = self._evaluate(expression, candidate)
                entry.cel_results[cache_key] = outcome
            if isinstance(outcome, str):
                raise AllocationError(f"{where(i)}: {outcome}")
            if not outcome:
                return False
        return True

    def _evaluate(self, expression: str, candidate: Candidate) -> bool | str:
        """The selector's outcome on the device: True/False or the error message. Devices that look the
        same to the expression (equal :func:`~.cel.read_key`) share one evaluation."""
        selector = self.selectors.get(expression)
        if selector.error:
            return f"CEL compile error: {selector.error}"
        from koord_scheduler.plugins.dynamicresources.cel import CelRuntimeError, device_value, read_key

        device = candidate.entry.slice.devices[candidate.index]
        driver = candidate.device_id.driver
        key = read_key(selector.reads, driver, device) if selector.reads is not None else None
        if key is not None:
            known = selector.memo.get(key)
            if known is not None:
                return known
        outcome: bool | str
        try:
            outcome = selector.matches(device_value(driver, device), cost_limit=self.cost_limit)
        except CelRuntimeError as err:
            outcome = f"CEL runtime error: {err}"
        if key is not None:
            if len(selector.memo) >= _MEMO_SIZE:
                selector.memo.clear()
            selector.memo[key] = outcome
        return outcome

    def allocate(
        self, node: Node, claims: Sequence[ResourceClaim], *, deadline: float | None = None
    ) -> list[AllocationResult] | None:
        """One allocation per claim on ``node``, or None. Raises :class:`AllocationError`,
        :class:`FailedOnNodeError`, or ``TimeoutError`` once ``time.monotonic()`` passes ``deadline``
        (``filterTimeout``)."""
        return _Search(self, node, claims, deadline).run()


class _Search:
    def __init__(
        self, allocator: Allocator, node: Node, claims: Sequence[ResourceClaim], deadline: float | None
    ) -> None:
        self.a = allocator
        self.deadline = deadline
        self.steps = 0
        self.node = node
        self.claims = claims
        self.pools: list[Pool] = allocator.node_pools.pools(node)
        self.matches: dict[tuple[DeviceId, int, str], bool] = {}
        self.in_use: dict[DeviceId, set[int]] = {}
        self.results: list[list[_Picked]] = [[] for _ in claims]
        self.constraints: list[list[_MatchAttribute]] = []
        self.requests: list[list[list[_RequestData]]] = []
        """Per claim, per request: its alternatives (one entry unless ``firstAvailable``)."""
        self.chosen: dict[tuple[int, int], int] = {}

    # ----- setup -----

    def run(self) -> list[AllocationResult] | None:
        for claim_index, claim in enumerate(self.claims):
            per_request: list[list[_RequestData]] = []
            min_devices = 0
            for request in claim.spec.requests:
                if request.first_available:
                    if not self.a.features.prioritized_list:
                        raise AllocationError(
                            f"claim {claim.key}, request {request.name}: has subrequests, "
                            "but the DRAPrioritizedList feature is disabled"
                        )
                    alternatives = [
                        self._request_data(claim_index, claim, sub, sub.name, request.name)
                        for sub in request.first_available
                    ]
                    min_devices += min(d.num_devices for d in alternatives)
                else:
                    assert request.exactly is not None
                    alternatives = [self._request_data(claim_index, claim, request.exactly, request.name, "")]
                    min_devices += alternatives[0].num_devices
                per_request.append(alternatives)
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(
                    f"claim {claim.key}: number of requested devices {min_devices} exceeds the claim limit "
                    f"of {ALLOCATION_RESULTS_MAX_SIZE}"
                )
            self.requests.append(per_request)
            self.constraints.append([_MatchAttribute(c.requests, c.match_attribute) for c in claim.spec.constraints])
        if not self._allocate_claim(0):
            for pool in self.pools:
                if pool.invalid:
                    raise FailedOnNodeError(
                        f"invalid resource pools were encountered: {pool.pool_id}: {pool.invalid_reason}"
                    )
            return None
        return [self._result(i, claim) for i, claim in enumerate(self.claims)]

    def _request_data(
        self, claim_index: int, claim: ResourceClaim, sub: DeviceSubRequest, name: str, parent: str
    ) -> _RequestData:
        full = f"{parent}/{name}" if parent else name
        if sub.admin_access is not None and not self.a.features.admin_access:
            raise AllocationError(
                f"claim {claim.key}, request {full}: admin access is requested, but the feature is disabled"
            )
        device_class = self.a.classes.get(sub.device_class_name)
        if device_class is None:
            raise AllocationError(
                f"claim {claim.key}, request {full}: could not retrieve device class {sub.device_class_name}: "
                f'deviceclass.resource.k8s.io "{sub.device_class_name}" not found'
            )
        data = _RequestData(claim_index, name, parent, sub, device_class, sub.count)
        if sub.allocation_mode is AllocationMode.ALL:
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"claim {claim.key}, request {full}: asks for all devices, but resource pool "
                        f"{pool.pool_id} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"claim {claim.key}, request {full}: asks for all devices, but resource pool "
                        f"{pool.pool_id} is currently invalid"
                    )
                for candidate in self._pool_candidates(pool):
                    if self._selectable(data, candidate):
                        data.all_devices.append(candidate)
            data.num_devices = len(data.all_devices)
        return data

    @staticmethod
    def _pool_candidates(pool: Pool) -> list[Candidate]:
        return pool.candidates

    # ----- search -----

    def _allocate_claim(self, claim_index: int) -> bool:
        if claim_index >= len(self.claims):
            return True
        return self._allocate_request(claim_index, 0)

    def _allocate_request(self, claim_index: int, request_index: int) -> bool:
        per_request = self.requests[claim_index]
        if request_index >= len(per_request):
            return self._allocate_claim(claim_index + 1)
        alternatives = per_request[request_index]
        for choice, data in enumerate(alternatives):
            if len(self.results[claim_index]) + data.num_devices > ALLOCATION_RESULTS_MAX_SIZE:
                continue
            if data.sub.allocation_mode is AllocationMode.ALL and not data.all_devices:
                continue
            if self._allocate_device(data, request_index, 0):
                self.chosen[(claim_index, request_index)] = choice
                return True
        return False

    def _allocate_device(self, data: _RequestData, request_index: int, device_index: int) -> bool:
        self.steps += 1
        if self.deadline is not None and self.steps % 64 == 0 and time.monotonic() > self.deadline:
            raise TimeoutError
        claim_index = data.claim_index
        if device_index >= data.num_devices:
            return self._allocate_request(claim_index, request_index + 1)
        if data.sub.allocation_mode is AllocationMode.ALL:
            candidate = data.all_devices[device_index]
            undo = self._take(data, candidate, must=True)
            if undo is None:
                return False
            if self._allocate_device(data, request_index, device_index + 1):
                return True
            undo()
            return False
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for candidate in self._pool_candidates(pool):
                if not self._free(data, candidate.device_id) or not self._selectable(data, candidate):
                    continue
                undo = self._take(data, candidate, must=False)
                if undo is None:
                    continue
                if self._allocate_device(data, request_index, device_index + 1):
                    return True
                undo()
        return False

    def _free(self, data: _RequestData, device_id: DeviceId) -> bool:
        users = self.in_use.get(device_id)
        if data.sub.admin_access:
            return not users or data.claim_index not in users
        return device_id not in self.a.allocated and not users

    def _take(self, data: _RequestData, candidate: Candidate, *, must: bool) -> Callable[[], None] | None:
        if not self._free(data, candidate.device_id):
            return None
        device = candidate.entry.slice.devices[candidate.index]
        if device.consumes_counters and not self.a.features.partitionable_devices:
            return None
        if self.a.features.device_taints and self._taint_prevents(data, device.taints):
            return None
        constraints = self.constraints[data.claim_index]
        for i, constraint in enumerate(constraints):
            if not constraint.add(data, candidate):
                if must:
                    raise AllocationError(
                        f"claim {self.claims[data.claim_index].key}, request {data.full_name}: cannot add device "
                        f"{candidate.device_id} because a claim constraint would not be satisfied"
                    )
                for previous in constraints[:i]:
                    previous.remove(data)
                return None
        self.in_use.setdefault(candidate.device_id, set()).add(data.claim_index)
        picked = self.results[data.claim_index]
        picked.append(_Picked(candidate, data))

        def undo() -> None:
            for constraint in constraints:
                constraint.remove(data)
            self.in_use[candidate.device_id].discard(data.claim_index)
            picked.pop()

        return undo

    @staticmethod
    def _taint_prevents(data: _RequestData, taints: tuple[DeviceTaint, ...]) -> bool:
        for taint in taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in data.sub.tolerations
            ):
                return True
        return False

    def _selectable(self, data: _RequestData, candidate: Candidate) -> bool:
        key = (candidate.device_id, data.claim_index, data.full_name)
        known = self.matches.get(key)
        if known is not None:
            return known
        claim = self.claims[data.claim_index]
        result = self.a.device_matches(candidate, data.device_class, data.sub.selectors, claim.key, self.node)
        self.matches[key] = result
        return result

    # ----- results -----

    def _result(self, claim_index: int, claim: ResourceClaim) -> AllocationResult:
        picked = self.results[claim_index]
        results = tuple(
            DeviceResult(
                request=p.data.full_name,
                driver=p.candidate.device_id.driver,
                pool=p.candidate.device_id.pool,
                device=p.candidate.device_id.device,
                admin_access=True if p.data.sub.admin_access else None,
                tolerations=p.data.sub.tolerations,
            )
            for p in picked
        )
        return AllocationResult(
            results=results,
            config=self._configs(claim_index, claim),
            node_selector=self._node_selector(picked),
        )

    def _configs(self, claim_index: int, claim: ResourceClaim) -> tuple[DeviceConfig, ...]:
        out: list[DeviceConfig] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        selected: list[_RequestData] = []
        for request_index, alternatives in enumerate(self.requests[claim_index]):
            data = alternatives[self.chosen.get((claim_index, request_index), 0)]
            selected.append(data)
            known = class_ranges.get(data.device_class.name)
            if known is not None:
                for i in range(*known):
                    out[i] = DeviceConfig((*out[i].requests, data.full_name), out[i].opaque_json, out[i].source)
                continue
            start = len(out)
            for config in data.device_class.config:
                out.append(DeviceConfig((data.full_name,), config.opaque_json, "FromClass"))
            class_ranges[data.device_class.name] = (start, len(out))
        for config in claim.spec.config:
            entry = DeviceConfig(config.requests, config.opaque_json, "FromClaim")
            if not config.requests:
                out.append(entry)
                continue
            for data in selected:
                base = data.parent_name or data.request_name
                if base in config.requests or (data.parent_name and data.full_name in config.requests):
                    out.append(entry)
        return tuple(out)

    @staticmethod
    def _node_selector(picked: list[_Picked]) -> tuple[NodeSelectorTerm, ...] | None:
        """``createNodeSelector``: a node-local device pins the claim to its node; selectors merge."""
        expressions: list[SelectorRequirement] = []
        fields: list[SelectorRequirement] = []
        for p in picked:
            s = p.candidate.entry.slice
            device = s.devices[p.candidate.index]
            node_name, selector = (
                (device.node_name, device.node_selector)
                if s.per_device_node_selection
                else (s.node_name, s.node_selector)
            )
            if node_name:
                field_req = SelectorRequirement("metadata.name", Operator.IN, (node_name,))
                return (NodeSelectorTerm(match_fields=(field_req,)),)
            if selector:
                term = selector[0]
                for requirement in term.match_fields:
                    if requirement not in fields:
                        fields.append(requirement)
                for requirement in term.match_expressions:
                    if requirement not in expressions:
                        expressions.append(requirement)
        if not expressions and not fields:
            return None
        return (NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),)
