"""Catalog lookups: model and hardware names -> fact records (data files in catalogs/).

A config names a catalog entry (``Qwen/Qwen3-32B-FP8``, ``h200_sxm``) or gives
the record inline; either way the passes see one plain dict.  Names match
case-insensitively, with or without the organisation prefix, or by alias.
"""
from __future__ import annotations

import difflib
from functools import lru_cache
from importlib.resources import files
from typing import Any, Mapping

import orjson
from pyrsistent import thaw

from .diagnostics import Diagnostic


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    return orjson.loads(files("kvreplay.compiler.catalogs").joinpath(name).read_bytes())


def models() -> dict[str, dict]:
    return _load("models.json")["models"]


def hardware() -> dict[str, dict]:
    return _load("hardware.json")["hardware"]


def backends() -> dict[str, dict]:
    return _load("backends.json")["backends"]


def _index(table: dict[str, dict]) -> dict[str, str]:
    index: dict[str, str] = {}
    for name, record in table.items():
        index[name.lower()] = name
        index[name.split("/")[-1].lower()] = name
        for alias in record.get("aliases", ()):
            index[alias.lower()] = name
    return index


def _resolve(table: dict[str, dict], value: Any, what: str, pointer: str) -> tuple[dict | None, Diagnostic | None]:
    if isinstance(value, Mapping):
        return thaw(value), None
    key = _index(table).get(str(value).lower())
    if key is not None:
        return {"name": key, **table[key]}, None
    close = difflib.get_close_matches(str(value), sorted(table), n=1, cutoff=0.5)
    hint = f"did you mean `{close[0]}`?" if close else "known: " + ", ".join(sorted(table))
    return None, Diagnostic(f"CATALOG-{what.upper()}", pointer, f"unknown {what} `{value}`",
                            hint + f" Or give the {what} inline as a mapping (see `kvreplay schema`).")


def resolve_model(value: Any, pointer: str = "/engine/model"):
    return _resolve(models(), value, "model", pointer)


def resolve_hardware(value: Any, pointer: str = "/engine/hardware"):
    return _resolve(hardware(), value, "hardware", pointer)
