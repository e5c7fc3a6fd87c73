"""Go ``time.Duration`` strings ("1m30s", "150ms") as float seconds, for ``metav1.Duration`` fields."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Parse a Go duration string into seconds, as ``time.ParseDuration`` does.

    Accepts an optional sign and a sequence of ``<number><unit>`` parts; ``"0"`` alone is allowed.
    Raises ``ValueError`` with Go's wording for anything else.
    """
    original = text
    sign = 1.0
    if text[:1] in "+-" and text:
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    if text == "0":
        return 0.0
    if not text:
        raise ValueError(f'time: invalid duration "{original}"')
    total = 0.0
    pos = 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            if re.match(r"\d+\.?\d*|\.\d+", text[pos:]):
                raise ValueError(f'time: missing unit in duration "{original}"')
            raise ValueError(f'time: invalid duration "{original}"')
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return sign * total


def format_go_duration(seconds: float) -> str:
    """Inverse of :func:`parse_go_duration` for the values configs use ("15s", "1m30s", "500ms", "0s")."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    remaining = abs(seconds)
    if remaining < 1:
        millis = remaining * 1000
        return f"{sign}{millis:g}ms"
    hours, remaining = divmod(remaining, 3600)
    minutes, secs = divmod(remaining, 60)
    out = sign
    if hours:
        out += f"{int(hours)}h"
    if hours or minutes:
        out += f"{int(minutes)}m"
    return out + f"{round(secs, 9):g}s"


def _validate(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # metav1.Duration only unmarshals from a string; a bare number is ambiguous (seconds? ns?).
        raise ValueError(f'a duration must be a string like "15s", got the number {value}')
    if not isinstance(value, str):
        raise ValueError(f'a duration must be a string like "15s", got {type(value).__name__}')
    return parse_go_duration(value.strip())


GoDuration = Annotated[
    float,
    BeforeValidator(_validate),
    PlainSerializer(format_go_duration, return_type=str, when_used="json"),
]
"""A duration field: Go syntax on the wire, float seconds in Python."""
