"""Value types for command-line flags: each parses and checks one value, or raises ``ArgumentTypeError``
with a message that argparse prints as one line naming the flag.

Durations accept what Koordinator's koordlet accepts (Go durations such as ``10s``, ``1m30s``) and plain
seconds (``10``, ``0.5``), so a Koordinator DaemonSet's values and pykoord's own both work.
"""

from __future__ import annotations

import argparse
import math

from apis.slo import parse_go_duration


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_go_duration(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (want seconds, e.g. 10, or 10s)") from None
    if math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(f"not a finite duration: {text!r}")
    return float(value)


def positive_seconds(text: str) -> float:
    """A duration > 0 (tick intervals, timeouts)."""
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def non_negative_seconds(text: str) -> float:
    """A duration >= 0 (cool-down times)."""
    value = _seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def any_seconds(text: str) -> float:
    """A duration where <= 0 has a meaning of its own (documented by the flag, e.g. "disabled")."""
    return _seconds(text)


def port(text: str) -> int:
    """A TCP port 0..65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range 0..65535: {value}")
    return value


def port_or_off(text: str) -> int:
    """A TCP port 0..65535, or -1 for "off"."""
    if text.strip() == "-1":
        return -1
    return port(text)


def host_port(text: str) -> tuple[str, int]:
    """Go's ``host:port`` listen address (``:9316`` = every interface) → (host, port)."""
    host, sep, raw_port = text.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"want host:port (e.g. :9316), got {text!r}")
    return host.strip("[]") or "0.0.0.0", port(raw_port)


def go_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r} (want true or false)")
