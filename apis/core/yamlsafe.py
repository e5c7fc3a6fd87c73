"""``yaml.safe_load`` with a bound on what aliases may expand to.

A YAML file can name a node (``&x``) and repeat it (``*x``); nine aliases of nine aliases of ... (the
"billion laughs" file) make a tiny document whose JSON form has billions of values, and anything that walks
it (``json.dumps``, a deep copy) never ends. go-yaml, which Kubernetes' decoders use, refuses documents
with excessive aliasing; so does this loader: at most :data:`MAX_ALIAS_EXPANSION` nodes may be reached
through aliases in one document, and an alias may not refer to a node that contains it (a recursive
structure JSON cannot hold). Documents without aliases are unaffected.

Nesting is bounded too: PyYAML composes recursively (three Python frames a level), so a document nested a
few hundred levels deep would raise ``RecursionError``; a node deeper than :data:`MAX_DEPTH` is refused
with an ordinary ``yaml.YAMLError`` (``nested deeper than 200 levels``) before that happens.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_ALIAS_EXPANSION = 100_000
MAX_DEPTH = 200
"""Nesting accepted in one document (a Kubernetes object needs a few dozen at most)."""


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}
        self._expanded = 0
        self._depth = 0

    def compose_document(self) -> Any:
        self._sizes, self._expanded = {}, 0
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        alias = self.check_event(yaml.AliasEvent)
        if self._depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size = self._sizes.get(id(node))
        if alias and size is None:  # the anchor's node is still being composed: it contains itself
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a node that contains it", getattr(node, "start_mark", None)
            )
        if size is None:
            size = 1
            if isinstance(node, yaml.SequenceNode):
                size += sum(self._sizes.get(id(child), 1) for child in node.value)
            elif isinstance(node, yaml.MappingNode):
                size += sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
            self._sizes[id(node)] = size
        if alias:
            self._expanded += size
            if self._expanded > MAX_ALIAS_EXPANSION:
                problem = f"excessive aliasing (over {MAX_ALIAS_EXPANSION} nodes through aliases)"
                raise yaml.composer.ComposerError(None, None, problem, getattr(node, "start_mark", None))
        return node


def safe_load(text: str) -> Any:
    """One YAML document, as ``yaml.safe_load``; raises ``yaml.YAMLError`` on excessive aliasing too."""
    return yaml.load(text, Loader=_BoundedLoader)


def safe_load_all(text: str | bytes) -> list[Any]:
    """Every document, as ``list(yaml.safe_load_all(text))``, with the same bound per document."""
    return list(yaml.load_all(text, Loader=_BoundedLoader))
