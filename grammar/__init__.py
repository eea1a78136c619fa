"""The project's own small languages as .lark files, and one cached parser each.

`--set PATH=VALUE` overrides and quantities with units, in the --set options and
in a config's own values (``overrides.lark``).
"""
from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

from lark import Lark

OVERRIDES = "overrides.lark"


def grammar_text(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def parser(name: str, start: str = "start") -> Lark:
    return Lark(grammar_text(name), parser="lalr", start=start, propagate_positions=True,
                maybe_placeholders=False)
