"""Debian's headless Chromium for tests that look at a page: the DOM after it renders, and a screenshot
read back as pixels (a small PNG decoder: 8-bit RGB / RGBA, no interlacing, as Chromium writes them).

Chromium is not skipped when missing: :func:`chromium` fails the test with one line saying how to get it
(``scripts/test.sh`` installs it on CI machines with apt-get)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
"""Debian's Chromium, run as root on a machine without a network: the background-networking flags keep it
from trying connections that are refused."""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "chromium is not installed: `apt-get install chromium` (Debian's package) to run this test", pytrace=False
        )
    return found


def run(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dump_dom(page: Path, profile: Path) -> str:
    result = run(page, profile, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def screenshot(page: Path, profile: Path, png: Path, *, width: int = 1280, height: int = 1700) -> None:
    result = run(page, profile, f"--window-size={width},{height}", f"--screenshot={png}")
    assert result.returncode == 0 and png.is_file(), result.stderr[-2000:]


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """(width, height, pixels as RGB tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    height = depth = color = interlace = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1) : (y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for x in range(stride):
            left = row[x - channels] if x >= channels else 0
            up = previous[x]
            up_left = previous[x - channels] if x >= channels else 0
            if kind == 1:
                row[x] = (row[x] + left) & 0xFF
            elif kind == 2:
                row[x] = (row[x] + up) & 0xFF
            elif kind == 3:
                row[x] = (row[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                row[x] = (row[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append(row)
        previous = row
    pixels = [tuple(r[x : x + 3]) for r in rows for x in range(0, stride, channels)]
    return width, height, pixels
