"""Side table from JSON pointer to source position, built at load time.

Keeping positions out of the document lets every pass work on plain data; only
reporters ask where a pointer came from.  A pointer that names something the
user did not write (a missing required field, a default) resolves to its
nearest written ancestor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping


@dataclass(frozen=True)
class Span:
    line: int  # 1-based; 0 = unknown
    col: int  # 1-based
    source: str = ""  # set when the value came from elsewhere than the file (a --set override)

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


class SpanTable:
    """Pointer -> (key span, value span). May be filled lazily by a builder."""

    def __init__(self, values: Mapping[str, Span] | None = None, keys: Mapping[str, Span] | None = None,
                 builder: Callable[[], tuple[dict, dict]] | None = None):
        self._values = dict(values or {})
        self._keys = dict(keys or {})
        self._builder = builder

    def _ensure(self) -> None:
        if self._builder is not None:
            values, keys = self._builder()
            self._builder = None
            self._values.update(values)
            self._keys.update(keys)

    def value(self, pointer: str) -> Span | None:
        self._ensure()
        return self._values.get(pointer)

    def key(self, pointer: str) -> Span | None:
        self._ensure()
        return self._keys.get(pointer)

    def find(self, pointer: str, key: bool = False) -> Span:
        """Span of `pointer` (its key if `key`), else of its nearest ancestor."""
        self._ensure()
        current = pointer
        while True:
            table = self._keys if key else self._values
            span = table.get(current) or self._keys.get(current) or self._values.get(current)
            if span is not None:
                return span
            if not current:
                return Span(1, 1)
            current = current.rsplit("/", 1)[0]

    def is_collection(self, pointer: str) -> bool:
        """Whether `pointer` was written as a mapping or a list (something below it has a position)."""
        self._ensure()
        inside = pointer + "/"
        return any(p.startswith(inside) for p in self._values)

    def with_overrides(self, extra: Mapping[str, Span]) -> "SpanTable":
        self._ensure()
        values = dict(self._values)
        values.update(extra)
        return SpanTable(values, self._keys)
