"""The canonical Spec every pass reads and returns, plus path helpers over it.

A Spec is immutable: the document is a pyrsistent tree in the predict-YAML
shape (whatever the front-end was), `origin` maps JSON pointers of values a
pass added to their provenance (``default(...)`` or ``inferred(...)``; anything
absent there was written by the user), and `geometry` holds per-role numbers
the geometry pass derived that have no field of their own.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from pyrsistent import PMap, freeze, pmap, thaw

from .diagnostics import join_pointer, split_pointer
from .spans import SpanTable

ROLES = ("aggregated", "prefill", "decode")
MISSING = object()


@dataclass(frozen=True)
class Spec:
    doc: PMap
    source: str = "<input>"
    frontend: str = "predict"
    origin: PMap = field(default_factory=pmap)
    geometry: PMap = field(default_factory=pmap)
    model: PMap = field(default_factory=pmap)  # resolved catalog record (resolve pass)
    hardware: PMap = field(default_factory=pmap)  # role -> resolved hardware record
    spans: SpanTable | None = field(default=None, compare=False, hash=False)

    # ------------------------------------------------------------------ reading
    def get(self, pointer: str, default: Any = None) -> Any:
        node: Any = self.doc
        for part in split_pointer(pointer):
            if isinstance(node, PMap):
                node = node.get(part, MISSING)
            elif isinstance(node, (list, tuple)) or hasattr(node, "index"):
                node = node[int(part)] if part.isdigit() and int(part) < len(node) else MISSING
            else:
                node = MISSING
            if node is MISSING:
                return default
        return node

    def has(self, pointer: str) -> bool:
        return self.get(pointer, MISSING) is not MISSING

    def provenance(self, pointer: str) -> str:
        """Who set the value at `pointer`: its own record, else that of the nearest mapping a pass set whole
        (a defaulted `traffic.load` gives its `type` too), else the user."""
        while pointer:
            if pointer in self.origin:
                return self.origin[pointer]
            pointer = pointer.rpartition("/")[0]
        return "user"

    def user_set(self, pointer: str) -> bool:
        return self.has(pointer) and pointer not in self.origin

    def roles(self) -> tuple[str, ...]:
        workers = self.get("/engine/workers", pmap())
        return tuple(r for r in ROLES if r in workers)

    # ------------------------------------------------------------------ writing
    def set(self, pointer: str, value: Any, why: str | None = None) -> "Spec":
        doc = self.doc.transform(list(split_pointer(pointer)), freeze(value))
        origin = self.origin.set(pointer, why) if why else self.origin
        return replace(self, doc=doc, origin=origin)

    def default(self, pointer: str, value: Any, why: str) -> "Spec":
        """Set `pointer` to `value` unless the user gave it; record the reason."""
        if self.has(pointer):
            return self
        return self.set(pointer, value, f"default({why})")

    def infer(self, pointer: str, value: Any, source: str) -> "Spec":
        return self.set(pointer, value, f"inferred({source})")

    def with_geometry(self, role: str, values: dict) -> "Spec":
        return replace(self, geometry=self.geometry.set(role, freeze(values)))

    def plain(self) -> dict:
        return thaw(self.doc)


def role_pointer(role: str, *parts: str) -> str:
    return join_pointer("engine", "workers", role, *parts)


def walk_leaves(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    """Every (pointer, scalar) of a plain or frozen tree, in key order."""
    if isinstance(node, (dict, PMap)):
        for key in sorted(node):
            yield from walk_leaves(node[key], pointer + join_pointer(key))
    elif isinstance(node, (list, tuple)) or type(node).__name__ == "PVector":
        if len(node) == 0:
            yield pointer, []
        for i, item in enumerate(node):
            yield from walk_leaves(item, f"{pointer}/{i}")
    else:
        yield pointer, node
