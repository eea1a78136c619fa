"""Quantities with units (`80 GiB`, `32 GB/s`, `1.5 ms`) and exact conversion to a field's unit.

A field's unit is its schema annotation ``x-unit`` (``B``, ``GB/s``, ``ms``,
``s``); a quantity of another dimension, or one for a unit-less field, is an
error that names both.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import NamedTuple

# Each unit as an exact multiple of its dimension's base (byte, byte/s, ns), so
# 80 GiB -> bytes or 250 us -> ms is exact rather than float-rounded.
_FACTORS = {
    "size": {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40},
    "bandwidth": {"MB/s": 10**6, "GB/s": 10**9, "TB/s": 10**12, "Gb/s": 10**9 // 8, "GiB/s": 2**30},
    "duration": {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "min": 60 * 10**9},
}
_UNITS = {unit: (dim, Fraction(f)) for dim, table in _FACTORS.items() for unit, f in table.items()}
# dimension -> (what a quantity of it is, what a field of it takes, an example)
_WORDS = {"size": ("a size", "bytes", "80 GiB"), "bandwidth": ("a bandwidth", "a bandwidth", "32 GB/s"),
          "duration": ("a duration", "a duration", "1.5 ms")}


class Quantity(NamedTuple):
    magnitude: float  # an int when written without a decimal point or exponent
    unit: str | None  # None for a bare number

    def __str__(self) -> str:
        return f"{self.magnitude}{self.unit or ''}"


class UnitError(ValueError):
    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def number(text: str) -> int | float:
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else float(text)


def convert(quantity: Quantity, target_unit: str | None, *, integer: bool = False,
            field: str = "this field") -> int | float:
    """`quantity` in `target_unit`: an exact int if `integer`, else a float. Raises UnitError."""
    quantity = Quantity(*quantity)  # a plain (magnitude, unit) tuple is fine too
    magnitude, unit = quantity
    if unit is None:
        return magnitude
    if target_unit is None:
        raise UnitError(f"`{field}` takes a plain number, not a quantity like `{quantity}`",
                        f"drop the unit `{unit}`, or quote the value to pass it as a string")
    (dimension, factor), (wanted, target_factor) = _UNITS[unit], _UNITS[target_unit]
    if dimension != wanted:
        raise UnitError(f"`{quantity}` is {_WORDS[dimension][0]} but `{field}` takes {_WORDS[wanted][1]}",
                        f"write {_WORDS[wanted][0]} such as `{_WORDS[wanted][2]}`")
    if not math.isfinite(magnitude):
        raise UnitError(f"`{quantity}` is not a finite number", "write a finite number")
    value = Fraction(repr(magnitude)) * factor / target_factor  # repr: the decimal the user wrote
    if integer and value.denominator != 1:
        raise UnitError(f"`{quantity}` is {float(value):g} {target_unit}, but `{field}` takes a whole number "
                        f"of {target_unit}", f"write a whole number of {target_unit}, e.g. `{math.ceil(value)}`")
    return int(value) if integer else float(value)


def quantity_pattern(unit: str) -> str:
    """A regular expression for a quantity written in any unit of `unit`'s dimension (`80GiB`, `1.5 TB`)."""
    dimension = _UNITS[unit][0]
    units = sorted(_FACTORS[dimension], key=lambda u: (-len(u), u))  # (longest first: `GiB/s` before `GiB`)
    return (r"^[ \t]*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*(?:"
            + "|".join(re.escape(u) for u in units) + r")[ \t]*$")
