"""Refuse numbers that are not finite (NaN, infinities) where a config is read.

YAML's `.nan` / `.inf`, a YAML literal too large for a float (`1e400` reads as
infinity), JSON's `NaN` / `Infinity` (JSON-SYNTAX: they are not JSON) and a
`--set` value such as `1e999` all become a diagnostic at the value, one for
each, before any pass sees them: no field of a config can mean them, and
arithmetic on them later would crash (`int(nan)`) or run forever (a rate of
infinity).  JSON's `1e400` is JSON, so it is left to the schema's ranges (and
to REPLAYSPEC-TIME, which names it in a ReplaySpec's times).
"""
from __future__ import annotations

import math
from typing import Any, Iterator

from .diagnostics import Diagnostic, field_words, join_pointer
from .spans import Span

CODE = "LOAD-NONFINITE"
HINT = "write a finite number in the field's range (`kvreplay schema` lists the ranges), or remove the key"


class Written(float):
    """A float that remembers how it was written (`1e400`, `NaN`), for the message."""

    text: str

    def __new__(cls, value: float, text: str) -> "Written":
        made = super().__new__(cls, value)
        made.text = text
        return made


def is_nonfinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def what(value: float, written: str) -> str:
    """`.nan` / `1e400` in the words of the message: what the number reads as."""
    if math.isnan(value):
        return f"is `{written}`, which is not a number (NaN)"
    sign = "minus " if value < 0 else ""
    if written.strip().lstrip("+-").lower() in (".inf", "inf", "infinity"):
        return f"is `{written}` ({sign}infinity)"
    return f"is `{written}`, too large for a number: it reads as {sign}infinity"


def diagnostic(pointer: str, value: float, written: str, span: Span | None = None,
               source: str = "", code: str = CODE) -> Diagnostic:
    """The diagnostic for one non-finite value at `pointer`, naming its field."""
    return Diagnostic(code, pointer, f"{field_words(pointer)} {what(value, written)}; every number in a config must be finite",
                      HINT, span, source)


def nonfinite_values(value: Any, pointer: str = "") -> Iterator[tuple[str, float]]:
    """(pointer, value) of every non-finite float inside plain data, in document order."""
    stack = [(pointer, value)]
    while stack:
        here, node = stack.pop()
        if is_nonfinite(node):
            yield here, node
        elif isinstance(node, dict):
            stack.extend((here + join_pointer(k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((f"{here}/{i}", v) for i, v in reversed(list(enumerate(node))))


def written(value: float) -> str:
    """How a non-finite float was written, if it remembers; else its YAML spelling."""
    if isinstance(value, Written):
        return value.text
    if math.isnan(value):
        return ".nan"
    return "-.inf" if value < 0 else ".inf"
