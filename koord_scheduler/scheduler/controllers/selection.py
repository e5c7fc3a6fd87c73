"""``--controllers``: which cluster controllers koord-scheduler runs, in kube-controller-manager's form.

A comma-separated list of ``*`` (every controller that is on by default), ``name`` (on) and ``-name``
(off); ``-name`` wins over ``*`` and ``name`` alike. The colocation, quota, quota profile, gang, device and
Reservation controllers are on by default, so the default ``*`` runs them; the descheduling ones
(``migration``, ``descheduler``) move running pods and are off until named, as kube-controller-manager's
optional controllers are, and so is ``colocationprofile`` (Koordinator's gate ``ColocationProfileController``
is off by default). An unknown name is refused before anything starts.
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
QUOTAPROFILE = "quotaprofile"
COLOCATIONPROFILE = "colocationprofile"
MIGRATION = "migration"
DESCHEDULER = "descheduler"
CONTROLLER_NAMES = (
    RESERVATION,
    NODESLO,
    NODERESOURCE,
    NODEMETRIC,
    ELASTICQUOTA,
    PODGROUP,
    DEVICERESOURCE,
    QUOTAPROFILE,
    COLOCATIONPROFILE,
    MIGRATION,
    DESCHEDULER,
)
"""Every controller koord-scheduler hosts."""
OFF_BY_DEFAULT = frozenset({COLOCATIONPROFILE, MIGRATION, DESCHEDULER})
"""Controllers ``*`` leaves off: they run only when named (the descheduling ones evict pods)."""


class ControllerSelectionError(ValueError):
    pass


def parse_controllers(
    text: str, *, known: Iterable[str] = CONTROLLER_NAMES, off_by_default: frozenset[str] = OFF_BY_DEFAULT
) -> frozenset[str]:
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
        on.update(n for n in names if n not in off_by_default)
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
