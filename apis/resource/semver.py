"""Semantic versions as ``github.com/blang/semver/v4`` parses and orders them (what Kubernetes' CEL
``semver`` library and DRA's ``version`` attributes use). Pure functions.

Strict SemVer 2.0.0: ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``, no leading zeros in numbers, build
metadata ignored in comparisons, a pre-release sorts before its release, numeric identifiers before
alphanumeric ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

_NUMBER = r"0|[1-9][0-9]*"
_IDENT = r"[0-9A-Za-z-]+"
_SEMVER = re.compile(
    rf"(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?"
)
_MAX_UINT64 = 2**64 - 1


@total_ordering
@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def compare(self, other: Version) -> int:
        """-1, 0 or 1, ignoring build metadata (``Version.Compare``)."""
        for a, b in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if a != b:
                return -1 if a < b else 1
        if not self.pre or not other.pre:
            if self.pre == other.pre:
                return 0
            return -1 if self.pre else 1
        for a_id, b_id in zip(self.pre, other.pre, strict=False):
            result = _compare_identifier(a_id, b_id)
            if result:
                return result
        if len(self.pre) == len(other.pre):
            return 0
        return -1 if len(self.pre) < len(other.pre) else 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __lt__(self, other: Version) -> bool:
        return self.compare(other) < 0


def _compare_identifier(a: int | str, b: int | str) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, int):
        return -1
    if isinstance(b, int):
        return 1
    return (a > b) - (a < b)


def parse_version(text: str) -> Version:
    """A strict semantic version; raises ``ValueError`` naming what is wrong."""
    match = _SEMVER.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])")
    numbers = [int(match.group(part)) for part in ("major", "minor", "patch")]
    if any(n > _MAX_UINT64 for n in numbers):
        raise ValueError(f"{text!r}: version number out of range")
    pre: list[int | str] = []
    for ident in (match.group("pre") or "").split(".") if match.group("pre") else ():
        if ident.isdigit():
            if len(ident) > 1 and ident[0] == "0":
                raise ValueError(f"{text!r}: numeric pre-release identifier {ident!r} has a leading zero")
            pre.append(int(ident))
        else:
            pre.append(ident)
    build = tuple(match.group("build").split(".")) if match.group("build") else ()
    return Version(numbers[0], numbers[1], numbers[2], tuple(pre), build)


def normalize_version(text: str) -> str:
    """Kubernetes' ``semver(text, true)`` normalisation: a leading ``v`` dropped, missing minor/patch
    filled with ``0``, leading zeros removed (``v01.2`` -> ``1.2.0``)."""
    text = text.removeprefix("v")
    core, sep, rest = _split_core(text)
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return text
    parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(parts) + sep + rest


def _split_core(text: str) -> tuple[str, str, str]:
    for i, ch in enumerate(text):
        if ch in "-+":
            return text[:i], ch, text[i + 1 :]
    return text, "", ""
