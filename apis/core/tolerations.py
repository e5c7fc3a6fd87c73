"""Taint toleration, exactly as kube-scheduler checks it. Pure functions.

``Toleration.ToleratesTaint`` and ``FindMatchingUntoleratedTaint``
(``staging/src/k8s.io/api/core/v1/toleration.go``,
``staging/src/k8s.io/component-helpers/scheduling/corev1/helpers.go``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from apis.core.types import Taint, TaintEffect, Toleration

SCHEDULING_EFFECTS: frozenset[TaintEffect] = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})
"""The effects TaintToleration's Filter considers (PreferNoSchedule only affects scoring)."""


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether ``toleration`` tolerates ``taint``.

    An empty effect tolerates every effect; an empty key matches every key (Kubernetes only allows that
    with ``Exists``, but matching does not check it). ``Exists`` ignores the value; ``Equal`` (or empty)
    requires equal values. ``Lt`` / ``Gt`` (alpha comparison operators, off by default in v1.35) and any
    other operator tolerate nothing.
    """
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator
    if operator in ("Equal", ""):
        return toleration.value == taint.value
    return operator == "Exists"


def tolerations_tolerate(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint`` (``TolerationsTolerateTaint``)."""
    return any(tolerates(toleration, taint) for toleration in tolerations)


def find_untolerated_taint(
    taints: Sequence[Taint],
    tolerations: Sequence[Toleration],
    effects: Collection[TaintEffect] | None = SCHEDULING_EFFECTS,
) -> Taint | None:
    """The first of ``taints`` (in node order) whose effect is in ``effects`` and that no toleration
    tolerates, or ``None``. ``effects=None`` considers every taint.

    The default is the Filter of TaintToleration: NoSchedule and NoExecute.
    """
    for taint in taints:
        if effects is not None and taint.effect not in effects:
            continue
        if not any(tolerates(toleration, taint) for toleration in tolerations):
            return taint
    return None
