"""Fast path for LowNodeLoad's ``nodeFit``: find the first cool node (in Koordinator's order) with room for
a pod, without scanning every cool node for every pod.

Koordinator scans the cool nodes in order for each pod of a hot node and books the pod's usage on the
first that stays under its high thresholds (``podFitsAnyNodeWithThreshold``). Bookings only fill nodes,
so at 5,000 nodes the scan passes thousands of full nodes per pod. :class:`RoomIndex` keeps each node's
room (high threshold minus usage, per resource) in a segment tree of per-resource maxima: a subtree whose
maximum room is below the pod's need in some resource cannot hold the pod and is skipped; the search
still goes left to right and still asks the caller's predicate (the scheduler's node fit), so it returns
exactly the node the linear scan would. ``tests/unit/descheduler/test_lownodeload_room_index.py`` checks
that on random pools.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

INF = float("inf")


class RoomIndex:
    def __init__(self, rooms: Sequence[Sequence[float]]) -> None:
        """``rooms[i][k]``: node ``i``'s room in resource ``k`` (``INF`` when unconstrained)."""
        self.n = len(rooms)
        self.k = len(rooms[0]) if rooms else 0
        size = 1
        while size < max(1, self.n):
            size *= 2
        self.size = size
        self.tree: list[list[float]] = [[-INF] * self.k for _ in range(2 * size)]
        for i, room in enumerate(rooms):
            self.tree[size + i] = list(room)
        for node in range(size - 1, 0, -1):
            left, right = self.tree[2 * node], self.tree[2 * node + 1]
            self.tree[node] = [max(a, b) for a, b in zip(left, right, strict=True)]

    def update(self, i: int, room: Sequence[float]) -> None:
        node = self.size + i
        self.tree[node] = list(room)
        node //= 2
        while node:
            left, right = self.tree[2 * node], self.tree[2 * node + 1]
            self.tree[node] = [max(a, b) for a, b in zip(left, right, strict=True)]
            node //= 2

    def room(self, i: int) -> list[float]:
        return self.tree[self.size + i]

    def first_fit(self, need: Sequence[float], accept: Callable[[int], bool]) -> int | None:
        """The smallest ``i`` whose room covers ``need`` in every resource and ``accept(i)``; None if none."""
        stack = [1]
        tree = self.tree
        pairs = tuple(enumerate(need))
        while stack:
            node = stack.pop()
            room = tree[node]
            if any(room[k] < n for k, n in pairs):
                continue
            if node >= self.size:
                i = node - self.size
                if i < self.n and accept(i):
                    return i
                continue
            stack.append(2 * node + 1)  # right after left: the stack pops the left subtree first
            stack.append(2 * node)
        return None
