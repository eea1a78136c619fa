"""What did and did not carry over to another tool's format: one ledger for every target.

A target reads the compiled Spec through `Carry.take` (each pointer it reads is marked carried) and
names what it cannot express with `Carry.drop(pointer, why)`.  Whatever the user wrote that the target
neither carried nor dropped is reported too ("TARGET has no field for it"), so nothing is lost
silently.  The ledger turns into `TARGET-DROPPED` diagnostics: warnings, or errors under `--strict`.
"""
from __future__ import annotations

from functools import cached_property

from pyrsistent import thaw

from ..compiler.diagnostics import Diagnostic, field_words
from ..compiler.spec import MISSING, Spec, walk_leaves

CODE = "TARGET-DROPPED"


def _ancestors(pointer: str):
    """`pointer` and every pointer above it, up to the document's top-level keys."""
    while pointer:
        yield pointer
        pointer = pointer.rpartition("/")[0]


class Carry:
    """The Spec a target reads, with the pointers it carried and those it dropped (and why)."""

    def __init__(self, spec: Spec, target: str, ignore: tuple[str, ...] = ()):
        self.spec, self.target = spec, target
        self.carried: set[str] = set(ignore)  # (pointers no user ever writes a value for: lowering bookkeeping)
        self.dropped: dict[str, str] = {}

    def take(self, pointer: str, default=None):
        """The value at `pointer` (plain data), which now counts as carried over."""
        self.carried.add(pointer)
        value = self.spec.get(pointer, MISSING)
        return default if value is MISSING else thaw(value)

    def has(self, pointer: str) -> bool:
        return self.spec.has(pointer)

    def user_set(self, pointer: str) -> bool:
        """Whether the user wrote `pointer` or something under it (rather than a default or an inference)."""
        return pointer in self._user_written

    def drop(self, pointer: str, why: str, always: bool = False) -> None:
        """`pointer` does not carry over; reported when the user wrote it (or `always`: a behaviour that changes)."""
        if always or self.user_set(pointer):
            self.dropped[pointer] = why
        self.carried.add(pointer)

    def drop_each(self, table: dict[str, str], under: str = "") -> None:
        """`drop` every `table` field (a pointer relative to `under`), with its why."""
        for field, why in table.items():
            self.drop(under + field, why)

    @cached_property
    def _user_written(self) -> frozenset[str]:
        """Every user-written leaf and every pointer above one."""
        return frozenset(p for leaf in self._user_leaves for p in _ancestors(leaf))

    @cached_property
    def _user_leaves(self) -> tuple[str, ...]:
        return tuple(pointer for pointer, _ in walk_leaves(self.spec.doc)
                     if self.spec.provenance(pointer).startswith("user"))

    def diagnostics(self, strict: bool = False) -> tuple[Diagnostic, ...]:
        dropped = dict(self.dropped)
        for pointer in self._user_leaves:
            if not any(p in self.carried for p in _ancestors(pointer)):
                dropped[pointer] = f"{self.target} has no field for it"
        severity = "error" if strict else "warning"
        hint = "" if strict else "--strict makes this an error"
        return tuple(Diagnostic(CODE, pointer, f"{field_words(pointer)} does not carry over to {self.target}: {why}",
                                hint, severity=severity) for pointer, why in sorted(dropped.items()))


class Refusal(Exception):
    """A config a target cannot express at all (not one field: the whole of it); the CLI says it as a usage error."""
