"""The queue invariant: every pending pod is in exactly one place, checked between scheduling cycles.

The places are activeQ, backoffQ, the unschedulable pool, the gated pool (PreEnqueue said not yet), and in
flight: a binding cycle holds it (waiting at Permit, in PreBind or Bind). A pod in none is lost: no event
or timer ever tries it again, only a restart does. A pod in two is tried twice. Tests run
:func:`queue_violations` after random event sequences; it reads the scheduler without changing it.
"""

from __future__ import annotations

from collections.abc import Iterable

from apis.core.types import Pod
from koord_scheduler.scheduler.queue import IN_FLIGHT
from koord_scheduler.scheduler.scheduler import Scheduler


def queue_violations(scheduler: Scheduler, pending: Iterable[Pod]) -> list[str]:
    """One line per break of the invariant, ``[]`` when it holds. Call between cycles (not from a plugin).

    ``pending``: the cluster's pods with no node that are not terminal (what the informers saw). Checked:

    - each of them that ``scheduler`` serves is in exactly one place;
    - nothing else is queued: a deleted or bound pod is in no place, except in flight while its binding
      cycle finishes;
    - a pod in flight has a binding cycle (between cycles nothing else is being scheduled);
    - a pod waiting at Permit, and a pod assumed in the cache whose binding has not finished, has one too.
    """
    places = scheduler.queue.locations()
    bindings = scheduler.bindings_in_flight()
    problems: list[str] = []
    served: set[str] = set()
    for pod in pending:
        if pod.node_name or pod.is_terminal or not scheduler.responsible_for(pod):
            continue
        served.add(pod.key)
        found = places.get(pod.key, [])
        if len(found) != 1:
            problems.append(f"pending pod {pod.key} is in {len(found)} places: {sorted(found) or 'none'}")
    for key, found in sorted(places.items()):
        if key not in served and found != [IN_FLIGHT]:
            problems.append(f"pod {key} is queued ({', '.join(found)}) but is not pending")
        if IN_FLIGHT in found and key not in bindings:
            problems.append(f"pod {key} is in flight with no binding cycle")
    for waiting in scheduler.waiting_pods:
        if waiting.pod.key not in bindings and not waiting.is_done():
            problems.append(f"pod {waiting.pod.key} waits at Permit with no binding cycle")
    for key in scheduler.cache.assumed_keys(binding=True):
        if key not in bindings:
            problems.append(f"pod {key} is assumed with no binding cycle")
    return problems
