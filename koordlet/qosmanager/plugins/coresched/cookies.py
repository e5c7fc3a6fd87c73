"""Core-scheduling cookies per group: Koordinator's cookie cache and its Add / Assign / Clear steps
(``runtimehooks/hooks/coresched/core_sched.go`` ``enableContainerCookie``, ``disableContainerCookie``,
``loadAllCookies``; ``helper.go`` ``addCookie``, ``assignCookie``, ``clearCookie``).

A group has one cookie, made by the kernel for the first process of the first container that joins; every
other process of the group gets the same cookie by "assign" from a process that already holds it. A process
that has left (its pid is gone) is dropped from the book. A container that stops being enabled has its
processes' cookies cleared (back to 0). The book survives agent restarts by reading the cookies the
processes already hold (:meth:`CookieBook.load`), so a restart never splits a group.

The prctl calls go through :class:`koordlet.system.coresched.CoreSchedOps`; tests pass a fake.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from koordlet.system.coresched import CoreSchedError, CoreSchedOps

log = logging.getLogger("koordlet.qos")

DEFAULT_COOKIE = 0


@dataclass(slots=True)
class CookieEntry:
    cookie: int
    pids: set[int] = field(default_factory=set)


@dataclass(slots=True)
class CookieBook:
    ops: CoreSchedOps
    groups: dict[str, CookieEntry] = field(default_factory=dict)
    """group id → its cookie and the pids known to hold it."""
    container_group: dict[str, str] = field(default_factory=dict)
    """container key (``<pod uid>/<cgroup name>``) → the group it was last put in."""
    loaded: bool = False

    def _get(self, pid: int) -> int | None:
        try:
            return self.ops.get(pid)
        except CoreSchedError:
            return None

    def load(self, containers: Iterable[tuple[str, str, Sequence[int]]]) -> None:
        """``loadAllCookies``: (container key, group, pids) of running containers; adopt the first non-default
        cookie each container's processes hold. A group seen with two cookies keeps the first."""
        for key, group, pids in containers:
            cookies = [c for c in (self._get(p) for p in pids) if c]
            if not cookies:
                continue
            cookie = cookies[0]
            holders = {p for p in pids if self._get(p) == cookie}
            entry = self.groups.get(group)
            if entry is None:
                self.groups[group] = CookieEntry(cookie, holders)
            elif entry.cookie == cookie:
                entry.pids |= holders
            else:
                log.warning(
                    "CoreSched: group %s has cookies %d and %d; the next reconcile fixes it",
                    group,
                    entry.cookie,
                    cookie,
                )
                continue
            self.container_group[key] = group
        self.loaded = True

    def enable(self, key: str, group: str, pids: Sequence[int]) -> int | None:
        """Put the container's processes in ``group``; returns the group's cookie (None when nothing was
        possible, e.g. the processes are gone)."""
        if not pids:
            return None
        entry = self.groups.get(group)
        if entry is not None and entry.cookie:
            if set(pids) <= entry.pids:
                self.container_group[key] = group
                return entry.cookie
            if self._assign(entry, pids):
                self.container_group[key] = group
                return entry.cookie
            if len([p for p in pids if self._get(p) is None]) >= len(pids):
                return None  # the container is restarting: try again next tick
            del self.groups[group]  # no process holds the cookie any more: make a new one
        return self._add(key, group, pids)

    def _assign(self, entry: CookieEntry, pids: Sequence[int]) -> bool:
        """``assignCookie``: give the cookie to the pids lacking it, from a sibling that holds it."""
        to_assign, holding, unknown = [], [], 0
        for pid in pids:
            cookie = self._get(pid)
            if cookie is None:
                unknown += 1
            elif cookie != entry.cookie:
                to_assign.append(pid)
            else:
                holding.append(pid)
        if unknown >= len(pids):
            return False
        if not to_assign:
            entry.pids |= set(holding)
            return True
        source = None
        for sibling in sorted(entry.pids):
            if self._get(sibling) == entry.cookie:
                source = sibling
                break
            entry.pids.discard(sibling)
        if source is None:
            return False
        failed = set(self.ops.assign(source, to_assign))
        entry.pids |= (set(to_assign) - failed) | set(holding)
        return True

    def _add(self, key: str, group: str, pids: Sequence[int]) -> int | None:
        """``addCookie``: a new cookie on the first pid's thread group, then assigned to the others."""
        first, rest = pids[0], list(pids[1:])
        try:
            self.ops.create(first)
            cookie = self.ops.get(first)
        except CoreSchedError as err:
            log.debug("CoreSched: cannot create a cookie for pid %d of group %r: %s", first, group, err)
            return None
        if cookie == DEFAULT_COOKIE:
            return None
        failed = set(self.ops.assign(first, rest)) if rest else set()
        self.groups[group] = CookieEntry(cookie, set(pids) - failed)
        self.container_group[key] = group
        return cookie

    def disable(self, key: str, pids: Sequence[int]) -> None:
        """``disableContainerCookie``: clear the cookies of a container that was in a group before."""
        last_group = self.container_group.pop(key, None)
        if last_group is None:
            return
        entry = self.groups.get(last_group)
        to_clear = [p for p in pids if self._get(p) not in (None, DEFAULT_COOKIE)]
        if to_clear:
            self.ops.clear(to_clear)
        if entry is not None:
            entry.pids -= set(pids)
            if not entry.pids:
                del self.groups[last_group]

    def forget(self, live_keys: set[str]) -> None:
        """Drop containers that no longer exist (their pids left with them)."""
        for key in [k for k in self.container_group if k not in live_keys]:
            del self.container_group[key]
