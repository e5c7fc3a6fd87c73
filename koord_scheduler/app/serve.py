"""``koord-scheduler --config FILE``: run against a real API server."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from koord_scheduler.framework.registry import Registry


def serve_main(argv: Sequence[str], registry: Callable[[], Registry]) -> int:
    print(
        "koord-scheduler: cluster mode is not available in this build yet; "
        "use 'koord-scheduler simulate' (see README.md)",
        file=sys.stderr,
    )
    return 2
