"""NodePorts' conflict rules (``HostPortInfo.CheckConflict``) as pure functions of plain values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from apis.core.types import HostPort
from koord_scheduler.framework.snapshot import BoolArray, PortKey, Positions

BIND_ALL_HOST_IP = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"

ProtocolPort = tuple[str, int]
PortUsers = Mapping[ProtocolPort, Sequence[tuple[int, str]]]
"""``(protocol, port)`` -> the ``(position, host IP)`` pairs using it."""


def sanitize(host_ip: str, protocol: str) -> tuple[str, str]:
    """Empty host IP means 0.0.0.0, empty protocol means TCP."""
    return host_ip or BIND_ALL_HOST_IP, protocol or DEFAULT_PROTOCOL


def conflicts(used_ips: Iterable[str], wanted_ip: str) -> bool:
    """Whether a wanted ``(ip, protocol, port)`` collides with the IPs already using that protocol/port.

    Wanting 0.0.0.0 collides with any IP; wanting a specific IP collides with that IP or with 0.0.0.0.
    """
    if wanted_ip == BIND_ALL_HOST_IP:
        return any(True for _ in used_ips)
    return any(ip in (BIND_ALL_HOST_IP, wanted_ip) for ip in used_ips)


def port_users(nodes: Iterable[tuple[int, Iterable[PortKey]]]) -> dict[ProtocolPort, list[tuple[int, str]]]:
    """Index the used ports of ``(position, used port keys)`` pairs by ``(protocol, port)``."""
    users: dict[ProtocolPort, list[tuple[int, str]]] = {}
    for pos, keys in nodes:
        for raw_ip, raw_protocol, port in keys:
            ip, protocol = sanitize(raw_ip, raw_protocol)
            users.setdefault((protocol, port), []).append((pos, ip))
    return users


def conflict_positions(users: PortUsers, wanted: Sequence[HostPort]) -> set[int]:
    """Positions where at least one of ``wanted`` conflicts."""
    bad: set[int] = set()
    for hp in wanted:
        if hp.port <= 0:
            continue
        ip, protocol = sanitize(hp.host_ip, hp.protocol)
        by_pos: dict[int, list[str]] = {}
        for pos, used_ip in users.get((protocol, hp.port), ()):
            by_pos.setdefault(pos, []).append(used_ip)
        bad.update(pos for pos, ips in by_pos.items() if conflicts(ips, ip))
    return bad


def free_ports_mask(positions: Positions, bad: Iterable[int], capacity: int) -> BoolArray:
    """Which of ``positions`` (all < ``capacity``) are not among ``bad``."""
    free = np.ones(capacity, dtype=np.bool_)
    free[list(bad)] = False
    return free.take(positions)
