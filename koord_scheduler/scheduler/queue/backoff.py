"""Backoff maths for the scheduling queue: pure functions of numbers, in seconds.

kube-scheduler's ``backoff_queue.go``: the backoff is ``initial * 2^(attempts-1)`` capped at ``maximum``, and
0 for a pod never tried. With PopFromBackoffQ on, the expiry is truncated to a whole second (the backoffQ's
ordering window) and a pod keeps backing off while ``expiry >= truncate(now)``, so a 1 s backoff begun at
t=100.2 (expiry 101) ends at t=102, when the aligned flush sees the window close.
"""

from __future__ import annotations

import math

ORDERING_WINDOW_SECONDS = 1.0
"""``backoffQOrderingWindowDuration``: backoff expiries are truncated to this when ``align`` is on."""

NEVER_BACKED_OFF = -math.inf
"""The expiry of a pod that has never been tried: it is never backing off."""


def backoff_duration(attempts: int, *, initial: float, maximum: float) -> float:
    """Seconds of backoff after ``attempts`` attempts: 0, then initial, 2x, 4x ... capped at ``maximum``."""
    if attempts <= 0:
        return 0.0
    shift = attempts - 1
    # Compare before multiplying so a huge attempt count cannot overflow to inf.
    if shift >= 64 or initial > maximum / (1 << shift):
        return maximum
    return float(initial * (1 << shift))


def align_to_window(t: float, *, align: bool) -> float:
    """Truncate ``t`` to the start of its ordering window (identity when ``align`` is off)."""
    if not align:
        return t
    return math.floor(t / ORDERING_WINDOW_SECONDS) * ORDERING_WINDOW_SECONDS


def backoff_expiry(timestamp: float, attempts: int, *, initial: float, maximum: float, align: bool) -> float:
    """When the backoff of a pod re-queued at ``timestamp`` after ``attempts`` attempts ends (before alignment
    rules for ``now``; see :func:`is_backing_off`). A pod never tried gets :data:`NEVER_BACKED_OFF`."""
    if attempts <= 0:
        return NEVER_BACKED_OFF
    duration = backoff_duration(attempts, initial=initial, maximum=maximum)
    return align_to_window(timestamp + duration, align=align)


def is_backing_off(expiry: float, now: float, *, align: bool) -> bool:
    """Whether a pod with backoff ``expiry`` must still wait at ``now``.

    Equality counts as backing off (kube: ``!expiry.Before(alignToWindow(now))``).
    """
    return expiry >= align_to_window(now, align=align)


def release_time(expiry: float, *, align: bool) -> float:
    """The earliest ``now`` at which :func:`is_backing_off` turns false: when to wake a waiting scheduler."""
    if align:
        return align_to_window(expiry, align=True) + ORDERING_WINDOW_SECONDS
    return math.nextafter(expiry, math.inf)
