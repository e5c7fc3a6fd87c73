"""``policy/v1`` PodDisruptionBudgets as preemption reads them: watched, parsed lean, kept by key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.core.parse import parse_label_selector, parse_object_meta
from koord_scheduler.framework.types import EventType, ObjectKind
from koord_scheduler.plugins.defaultpreemption.policy import DisruptionBudget


def parse_pdb(raw: Mapping[str, Any]) -> DisruptionBudget:
    """Raises ``ValueError`` (``ParseError``) for a malformed object; the watch reports and skips it."""
    meta = parse_object_meta(dict(raw), "PodDisruptionBudget", default_namespace="default")
    spec = raw.get("spec")
    spec = {} if spec is None else spec
    status = raw.get("status")
    status = {} if status is None else status
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        raise ValueError(f"PodDisruptionBudget {meta.namespace}/{meta.name}: spec and status must be objects")
    allowed = status.get("disruptionsAllowed", 0)
    if not isinstance(allowed, int) or isinstance(allowed, bool):
        raise ValueError(
            f"PodDisruptionBudget {meta.namespace}/{meta.name}: status.disruptionsAllowed must be an integer"
        )
    disrupted = status.get("disruptedPods") or {}
    if not isinstance(disrupted, Mapping):
        raise ValueError(f"PodDisruptionBudget {meta.namespace}/{meta.name}: status.disruptedPods must be a map")
    return DisruptionBudget(
        namespace=meta.namespace,
        name=meta.name,
        selector=parse_label_selector(spec.get("selector")),
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(str(k) for k in disrupted),
    )


PDB_KIND = ObjectKind(
    kind="PodDisruptionBudget",
    group="policy",
    version="v1",
    plural="poddisruptionbudgets",
    namespaced=True,
    parse=parse_pdb,
)


class BudgetStore:
    """The PodDisruptionBudgets seen so far, ``namespace/name`` -> budget, in arrival order."""

    def __init__(self) -> None:
        self._budgets: dict[str, DisruptionBudget] = {}

    def on_event(self, event: EventType, old: Any, new: Any) -> None:
        if event == EventType.DELETED:
            if isinstance(old, DisruptionBudget):
                self._budgets.pop(f"{old.namespace}/{old.name}", None)
            return
        if isinstance(new, DisruptionBudget):
            self._budgets[f"{new.namespace}/{new.name}"] = new

    def list(self) -> list[DisruptionBudget]:
        return list(self._budgets.values())

    def __len__(self) -> int:
        return len(self._budgets)
