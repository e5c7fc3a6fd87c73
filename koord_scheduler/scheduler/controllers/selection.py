"""``--controllers``: which cluster controllers koord-scheduler runs, in kube-controller-manager's form.

A comma-separated list of ``*`` (every controller that is on by default), ``name`` (on) and ``-name``
(off); ``-name`` wins over ``*`` and ``name`` alike. Every controller here is on by default but those in
:data:`OFF_BY_DEFAULT` (Koordinator's gate ``ColocationProfileController`` is off by default), which run
only when named. An unknown name is refused before anything starts.
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
CONTROLLER_NAMES = (RESERVATION, NODESLO, NODERESOURCE, NODEMETRIC, ELASTICQUOTA, PODGROUP, DEVICERESOURCE,
                    QUOTAPROFILE, COLOCATIONPROFILE)
"""Every controller koord-scheduler hosts."""
OFF_BY_DEFAULT = frozenset({COLOCATIONPROFILE})
"""Controllers ``*`` leaves out: they run only when named."""


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
        on.update(n for n in names if n not in OFF_BY_DEFAULT)
    return frozenset(on - off)
