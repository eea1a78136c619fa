"""Apply `--set PATH=VALUE` overrides to a loaded document, left to right.

Each override is parsed with ``grammar/overrides.lark``; its path must exist in
the predict schema (an opal config's: the opal schema), and a quantity (`80 GiB`,
`32 GB/s`, `1.5 ms`) is converted to the unit its field is stored in (the schema's ``x-unit``).  Whether a value
has the right type is left to the validate pass, which runs after all
overrides; units are checked here because they are gone once converted.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..grammar import OVERRIDES, parser
from ..schema import OPAL, PREDICT, load_schema
from . import finite
from .diagnostics import CompileError, Diagnostic, join_pointer, pointer_to_dotted
from .schema_check import describe, suggest
from .schema_walk import applicable, schema_step
from .spans import Span, SpanTable
from .units import Quantity, UnitError, convert, number

# ------------------------------------------------------------------ parsing

@dataclass(frozen=True)
class Override:
    text: str
    index: int  # 1-based position among the --set options
    path: tuple[str | int, ...]
    pointer: str
    value: Any  # plain data; quantities stay Quantity until their field's unit is known
    part_columns: tuple[int, ...]  # 1-based column of each path part
    value_columns: Mapping[str, int]  # pointer relative to the value ("" = the value) -> column

    @property
    def source(self) -> str:
        return f"--set #{self.index}"

    def span(self, column: int) -> Span:
        return Span(1, column, source=self.source)


class _BadValue(Exception):
    """(column, message, hint) of a value the grammar accepts but YAML would not."""


def parse_quantity(text: str) -> Quantity:
    """`80 GiB` -> Quantity(80, "GiB"); `1.5` -> Quantity(1.5, None). Raises CompileError."""
    try:
        tree = parser(OVERRIDES, "quantity").parse(text)
    except UnexpectedInput as error:
        raise CompileError([Diagnostic("QUANTITY-SYNTAX", "", f"`{text.strip()}` is not a number with a unit",
                                       "write e.g. `80 GiB`, `32 GB/s` or `1.5 ms`",
                                       Span(1, max(error.column, 1)))]) from None
    value = _scalar(tree.data, tree.children[0])
    return value if isinstance(value, Quantity) else Quantity(value, None)


def parse_override(text: str, index: int) -> Override:
    """One `PATH=VALUE`; raises CompileError with a SET-SYNTAX diagnostic."""
    try:
        path_tree, value_tree = parser(OVERRIDES).parse(text).children
        columns: dict[str, int] = {}
        value = _read(value_tree, "", columns)
    except (UnexpectedInput, _BadValue) as error:
        column, message, hint = error.args if isinstance(error, _BadValue) else _explain(text, error)
        source = f"--set #{index}"
        raise CompileError([Diagnostic("SET-SYNTAX", "", message, hint, Span(1, column, source), source)]) from None
    path = tuple(int(t) if t.type == "INDEX" else str(t) for t in path_tree.children)
    return Override(text, index, path, join_pointer(*path), value,
                    tuple(t.column for t in path_tree.children), columns)


def _read(node, rel: str, columns: dict[str, int]) -> Any:
    """Plain data from a value tree, recording the column of every value under `rel`."""
    if node.data not in ("list", "map"):
        columns[rel] = node.children[0].column
        return _scalar(node.data, node.children[0])
    opener, *items = node.children  # `[` or `{`, kept by the grammar for its column
    columns[rel] = opener.column
    if node.data == "list":
        return [_read(item, f"{rel}/{i}", columns) for i, item in enumerate(items)]
    mapping: dict[str, Any] = {}
    for key_token, item in (pair.children for pair in items):
        key = _scalar("key", key_token)
        if key in mapping:  # as the YAML loader does: a second value would silently win
            raise _BadValue(key_token.column, f"key `{key}` appears twice in one mapping", "remove one of them")
        mapping[key] = _read(item, rel + join_pointer(key), columns)
    return mapping


_CONSTANTS = {"true": True, "false": False, "null": None}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}


def _number(text: str) -> int | float:
    """A number as written; one past float range (`1e999`) remembers its text to be refused by name."""
    value = number(text)
    return value if not finite.is_nonfinite(value) else finite.Written(value, text.strip())


def _scalar(kind: str, token: Token) -> Any:
    text = str(token)
    if kind in _CONSTANTS:
        return _CONSTANTS[kind]
    if kind == "quantity":  # the token is NUMBER [blanks] UNIT, and units hold no digits
        magnitude, unit = re.fullmatch(r"(.*?)[ \t]*([A-Za-z/]+)", text.strip()).groups()
        return Quantity(_number(magnitude), unit)
    if kind in ("integer", "float"):
        return _number(text)
    if token.type == "STRING_SQ":
        return text[1:-1].replace("''", "'")
    if token.type == "STRING_DQ":
        return re.sub(r"\\(x..|u....|.)", lambda m: _ESCAPES.get(m[1]) or chr(int(m[1][1:], 16)), text[1:-1])
    return text.rstrip()  # a bare string or a key: trailing blanks are not part of it


_VALUE_TERMINAL = re.compile(r".*_[TF]|STRING_..|LSQB|LBRACE")
_WORDS_FOR = {"KEY": "a key (letters, digits, `_`, `-`)", "INDEX": "a list index", "$END": "the end of the value"}


def _explain(text: str, error: UnexpectedInput) -> tuple[int, str, str]:
    """(column, message, hint) for a lark error, in the words of the override language."""
    at_end = isinstance(error, UnexpectedToken) and error.token.type == "$END"
    column = len(text) + 1 if at_end or error.column < 1 else error.column
    expected = getattr(error, "accepts", None) or getattr(error, "expected", None) or getattr(error, "allowed", ())
    if "=" not in text:
        return column, "an override needs PATH=VALUE but has no `=`", "write e.g. `engine.backend=sglang`"
    if at_end and text.rstrip().endswith("="):
        return column, "there is no value after `=`", 'write a value; `null` (or `~`) for none, `""` for an empty string'
    if isinstance(error, UnexpectedCharacters) and text[column - 1] in "\"'":
        return column, "this quoted string is not closed or has an unknown escape", \
            'close the quote; inside double quotes write \\" \\\\ \\n \\t or \\uXXXX'
    # `[` starts an index after a path part (where `=` may come too) but a list in a value
    words = sorted({"a value" if _VALUE_TERMINAL.fullmatch(name) and "EQUAL" not in expected else
                    _WORDS_FOR.get(name) or f"`{parser(OVERRIDES).get_terminal(name).pattern.value}`"
                    for name in expected}) or ["something else"]
    message = "the override ends too early" if at_end else f"unexpected `{text[column - 1]}` in the override"
    return column, message, "expected " + (", ".join(words[:-1]) + " or " if len(words) > 1 else "") + words[-1]


# ------------------------------------------------------------------ the schema
def _schemas_at(override: Override, root: dict) -> list[dict] | Diagnostic:
    """The schemas of the override's field, or a SET-PATH diagnostic at the first unknown part."""
    schemas = applicable(root, root)
    for i, part in enumerate(override.path):
        found = schema_step(schemas, part, root)
        if found:
            schemas = found
            continue
        parent = pointer_to_dotted(join_pointer(*override.path[:i]))
        keys = sorted({key for schema in schemas for key in schema.get("properties", {})})
        if isinstance(part, int):
            message, hint = f"`{parent}` is not a list, so it has no item `[{part}]`", f"remove `[{part}]`"
        elif keys:
            message, hint = f"unknown key `{part}` " + (f"in `{parent}`" if i else "at the top level"), suggest(part, keys)
        elif any("items" in schema for schema in schemas):
            message, hint = f"`{parent}` is a list, not a mapping", f"pick an item by index, e.g. `{parent}[0]`"
        else:
            message, hint = f"`{parent}` takes a single value, so it has no key `{part}`", f"set `{parent}` itself"
        return _path_problem(override, i, message, hint)
    return schemas


def _path_problem(override: Override, i: int, message: str, hint: str) -> Diagnostic:
    return Diagnostic("SET-PATH", join_pointer(*override.path[: i + 1]), message, hint,
                      override.span(override.part_columns[i]), override.source)


def _with_units(value: Any, rel: str, override: Override, schemas: list[dict], root: dict,
                problems: list[Diagnostic]) -> Any:
    """`value` with every Quantity converted to the x-unit of its field."""
    if isinstance(value, dict):
        return {k: _with_units(v, rel + join_pointer(k), override, schema_step(schemas, k, root), root, problems)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_with_units(v, f"{rel}/{i}", override, schema_step(schemas, i, root), root, problems)
                for i, v in enumerate(value)]
    if not isinstance(value, Quantity):
        return value
    if not schemas:  # a key the schema does not know: keep the text; validate names the key
        return str(value)
    unit = next((s["x-unit"] for s in schemas if "x-unit" in s), None)
    types = {t for s in schemas for t in (s["type"] if isinstance(s.get("type"), list) else [s.get("type")])}
    pointer = override.pointer + rel
    try:
        return convert(value, unit, integer="integer" in types and "number" not in types,
                       field=pointer_to_dotted(pointer))
    except UnitError as error:
        span = override.span(override.value_columns[rel])
        problems.append(Diagnostic("SET-UNIT", pointer, str(error), error.hint, span, override.source))
        return value


def _nonfinite(override: Override) -> list[Diagnostic]:
    """A value such as `1e999` or `1e999 GiB` (infinity once read), at its column, as the loader refuses it."""
    plain = _magnitudes(override.value)
    return [finite.diagnostic(override.pointer + rel, value, finite.written(value),
                              override.span(override.value_columns[rel]), override.source)
            for rel, value in finite.nonfinite_values(plain)]


def _magnitudes(value: Any) -> Any:
    if isinstance(value, Quantity):
        return value.magnitude
    if isinstance(value, dict):
        return {k: _magnitudes(v) for k, v in value.items()}
    return [_magnitudes(v) for v in value] if isinstance(value, list) else value


# ------------------------------------------------------------------ applying

def _assign(document: dict, override: Override, value: Any) -> dict[str, Span] | Diagnostic:
    """Write `value` at the override's path in `document` (in place), creating missing
    containers; return the spans of everything written, or why it cannot be written."""
    written: dict[str, Span] = {}
    node: Any = document
    for i, part in enumerate(override.path):
        here = pointer_to_dotted(join_pointer(*override.path[:i]))
        if not isinstance(node, list if isinstance(part, int) else dict):
            kind = "a list" if isinstance(part, int) else "a mapping"
            return _path_problem(override, i, f"`{here}` holds {describe(node)}, not {kind}",
                                 f"set `{here}` itself, e.g. `{here}=" + ("[...]`" if kind == "a list" else "{...}`"))
        if isinstance(part, int) and part > len(node):
            return _path_problem(override, i, f"`{here}` has {len(node)} item(s), so `[{part}]` is out of range",
                                 f"use an index up to {len(node)} (`[{len(node)}]` appends)")
        if i == len(override.path) - 1:
            child = value
        else:
            child = node.get(part) if isinstance(node, dict) else node[part] if part < len(node) else None
            if child is None:  # missing (or YAML's empty `key:`): create it
                child = [] if isinstance(override.path[i + 1], int) else {}
                written[join_pointer(*override.path[: i + 1])] = override.span(override.part_columns[i])
        if isinstance(node, list) and part == len(node):
            node.append(child)
        else:
            node[part] = child
        node = child
    written.update({override.pointer + rel: override.span(col) for rel, col in override.value_columns.items()})
    return written


def apply_overrides(document: dict, spans: SpanTable | None,
                    overrides: Sequence[str]) -> tuple[dict, SpanTable]:
    """`document` with `overrides` applied left to right (a later one wins), and spans
    that point each overridden value at its `--set #i`. Raises CompileError with every problem."""
    from .frontends.opal import detect as is_opal  # (an opal config's paths are the opal schema's)

    root = load_schema(OPAL if is_opal(document) else PREDICT)
    result = copy.deepcopy(document)  # the caller's document is never changed
    written: dict[str, Span] = {}
    problems: list[Diagnostic] = []
    for index, text in enumerate(overrides, start=1):
        try:
            override = parse_override(text, index)
        except CompileError as error:
            problems.extend(error.diagnostics)
            continue
        nonfinite = _nonfinite(override)
        if nonfinite:
            problems.extend(nonfinite)
            continue
        schemas = _schemas_at(override, root)
        if isinstance(schemas, Diagnostic):
            problems.append(schemas)
            continue
        unit_problems: list[Diagnostic] = []
        value = _with_units(override.value, "", override, schemas, root, unit_problems)
        if unit_problems:
            problems.extend(unit_problems)
            continue
        outcome = _assign(result, override, value)
        if isinstance(outcome, Diagnostic):
            problems.append(outcome)
        else:
            written.update(outcome)
    if problems:
        raise CompileError(problems)
    return result, (spans or SpanTable()).with_overrides(written)
