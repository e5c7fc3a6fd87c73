"""``--controllers``: which cluster controllers koord-scheduler runs, in kube-controller-manager's form.

A comma-separated list of ``*`` (every controller that is on by default), ``name`` (on) and ``-name``
(off); ``-name`` wins over ``*`` and ``name`` alike. Every controller here is on by default, so the
default ``*`` runs them all. An unknown name is refused before anything starts.
"""

from __future__ import annotations

from collections.abc import Iterable

RESERVATION = "reservation"
NODESLO = "nodeslo"
NODERESOURCE = "noderesource"
NODEMETRIC = "nodemetric"
ELASTICQUOTA = "elasticquota"
PODGROUP = "podgroup"
DEVICERESOURCE = "deviceresource"
CONTROLLER_NAMES = (RESERVATION, NODESLO, NODERESOURCE, NODEMETRIC, ELASTICQUOTA, PODGROUP, DEVICERESOURCE)
"""Every controller koord-scheduler hosts; all on by default."""


class ControllerSelectionError(ValueError):
    pass


def parse_controllers(text: str, *, known: Iterable[str] = CONTROLLER_NAMES) -> frozenset[str]:
    """The controllers ``text`` turns on. Raises :class:`ControllerSelectionError` for an unknown name
    or an empty entry."""
    names = tuple(known)
    star = False
    on: set[str] = set()
    off: set[str] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise ControllerSelectionError(f"--controllers: empty entry in {text!r}")
        if item == "*":
            star = True
            continue
        negated = item.startswith("-")
        name = item[1:] if negated else item
        if name not in names:
            raise ControllerSelectionError(
                f"--controllers: unknown controller {name!r} (known: {', '.join(names)}, or *)"
            )
        (off if negated else on).add(name)
    if star:
        on.update(names)
    return frozenset(on - off)


BATCH_RESOURCE = "BatchResource"
MID_RESOURCE = "MidResource"
CPU_NORMALIZATION = "CPUNormalization"
RESOURCE_AMPLIFICATION = "ResourceAmplification"
NODERESOURCE_PLUGINS = (CPU_NORMALIZATION, RESOURCE_AMPLIFICATION, MID_RESOURCE, BATCH_RESOURCE)
"""The ``noderesource`` controller's calculate plugins (``--noderesource-plugins``), in Koordinator's
order; every one is on by default."""


def parse_noderesource_plugins(text: str) -> frozenset[str]:
    """``--noderesource-plugins``: ``*``, ``Name``, ``-Name``, as Koordinator's flag. Raises
    :class:`ControllerSelectionError` for an unknown plugin or an empty entry."""
    try:
        return parse_controllers(text, known=NODERESOURCE_PLUGINS)
    except ControllerSelectionError as exc:
        message = str(exc).replace("--controllers", "--noderesource-plugins").replace("controller", "plugin")
        raise ControllerSelectionError(message) from None
