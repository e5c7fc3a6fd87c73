from __future__ import annotations

import itertools

from koord_scheduler.framework.types import QueuedPodInfo
from koord_scheduler.plugins.queuesort.plugin import PrioritySort
from tests.builders import make_pod


def test_sort_key_orders_exactly_like_less() -> None:
    plugin = PrioritySort()
    infos = [
        QueuedPodInfo(make_pod(f"p{i}").priority(prio).build(), timestamp=ts)
        for i, (prio, ts) in enumerate([(0, 3.0), (10, 5.0), (10, 1.0), (0, 1.0), (-5, 0.0)])
    ]
    for a, b in itertools.permutations(infos, 2):
        assert plugin.less(a, b) == (plugin.sort_key(a) < plugin.sort_key(b))
