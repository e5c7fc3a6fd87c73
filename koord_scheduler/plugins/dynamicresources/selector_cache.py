"""The plugin's cache of compiled CEL selectors.

Kept apart from :mod:`.cel` so that the plugin can be built without importing cel-python and its parser
(tens of milliseconds at start-up): :mod:`.cel` is imported when the first selector is compiled."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from koord_scheduler.plugins.dynamicresources.cel import Selector


class SelectorCache:
    """Compiled selectors by expression (upstream keeps an LRU of the last few as well)."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._compiled: OrderedDict[str, Selector] = OrderedDict()

    def get(self, expression: str) -> Selector:
        selector = self._compiled.get(expression)
        if selector is None:
            from koord_scheduler.plugins.dynamicresources.cel import Selector

            selector = Selector(expression)
            self._compiled[expression] = selector
            if len(self._compiled) > self._size:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(expression)
        return selector
