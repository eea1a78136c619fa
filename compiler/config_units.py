"""Quantities with units written in the config itself (`bytes: 80GiB`, `d2h_bandwidth_gbps: 32 GB/s`,
`latency_to_first_byte_ms: 5us`): read with the `--set` grammar and converted to the field's unit.

Only a string at a field whose schema has an ``x-unit`` and takes a number is
touched, and only when it reads as a quantity that converts cleanly; anything
else is left for the schema check, whose hint then says which unit to write
(`unit_hint`).  So the plan only ever holds plain numbers.
"""
from __future__ import annotations

import re
from typing import Any

from ..schema import OPAL, PREDICT, load_schema
from .diagnostics import join_pointer, pointer_to_dotted
from .schema_walk import applicable, schema_step
from .units import Quantity, UnitError, convert, number, quantity_pattern


def schema_for(kind: str) -> str | None:
    """The schema whose `x-unit`s apply to a document of front-end `kind` (None: none are converted)."""
    return {"predict": PREDICT, "opal": OPAL}.get(kind)


def with_units(document: Any, schema_name: str) -> Any:
    """`document` with every convertible quantity string replaced by its number in the field's unit."""
    root = load_schema(schema_name)
    return _walk(document, applicable(root, root), root, "")


def _walk(value: Any, schemas: list[dict], root: dict, pointer: str) -> Any:
    if not schemas:  # (a key the schema does not know: left whole, however large, for the schema check to name)
        return value
    if isinstance(value, dict):
        return {k: _walk(v, schema_step(schemas, k, root), root, pointer + join_pointer(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, schema_step(schemas, i, root), root, pointer + join_pointer(i)) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    unit, integer = field_unit(schemas)
    if unit is None:
        return value
    try:
        return _converted(value, unit, integer, pointer_to_dotted(pointer))
    except UnitError:
        return value  # (the schema check reports it, with unit_hint's words)


def field_unit(schemas: list[dict]) -> tuple[str | None, bool]:
    """(the x-unit of a field that takes a number, whether it takes whole numbers only), or (None, False)."""
    unit = next((s["x-unit"] for s in schemas if "x-unit" in s), None)
    types = {t for s in schemas for t in (s["type"] if isinstance(s.get("type"), list) else [s.get("type")])}
    if unit is None or not types & {"number", "integer"}:
        return None, False
    return unit, "integer" in types and "number" not in types


def read_quantity(text: str) -> Quantity | None:
    """`80 GiB` -> Quantity(80, "GiB"), `1.5` -> Quantity(1.5, None), with the `--set` grammar; None if not one."""
    from lark.exceptions import UnexpectedInput  # (lark is loaded only for a config that writes a string here)

    from ..grammar import OVERRIDES, parser

    try:
        tree = parser(OVERRIDES, "quantity").parse(text)
    except UnexpectedInput:
        return None
    written = str(tree.children[0]).strip()
    if tree.data != "quantity":
        return Quantity(number(written), None)
    magnitude, unit = re.fullmatch(r"(.*?)[ \t]*([A-Za-z/]+)", written).groups()  # (units hold no digits)
    return Quantity(number(magnitude), unit)


def _converted(text: str, unit: str, integer: bool, field: str) -> int | float:
    quantity = read_quantity(text)
    if quantity is None or quantity.unit is None:  # (a quoted plain number stays a string: drop the quotes)
        raise UnitError("not a quantity with a unit", "")
    return convert(quantity, unit, integer=integer, field=field)


def unit_hint(text: str, schema: dict, pointer: str) -> str | None:
    """What to write instead of the string `text` at a field whose schema is `schema`, if units are the problem:
    the conversion's own reason for a quantity that does not fit, else the field's unit with an example."""
    unit, integer = field_unit([schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())])
    field = pointer_to_dotted(pointer)
    quantity = read_quantity(text)
    if quantity is not None and quantity.unit is not None:
        if unit is None:
            return f"`{field}` takes a plain number, not a quantity: drop the unit `{quantity.unit}`"
        try:
            convert(quantity, unit, integer=integer, field=field)
        except UnitError as error:  # (named as written: `1e999 GiB`, not the `infGiB` it reads as)
            return f"{error}: {error.hint}".replace(f"`{quantity}`", f"`{text.strip()}`")
    if unit is None:
        return None
    return f"write a number of {unit} or a quantity with its unit, e.g. `{_EXAMPLES.get(unit, '1 ' + unit)}`"


_EXAMPLES = {"B": "80 GiB", "GiB": "80 GiB", "GB/s": "32 GB/s", "TB/s": "3.35 TB/s", "ms": "5 ms", "s": "2 s",
             "ns": "500 ns"}


def editor_schema(schema_name: str = PREDICT) -> dict:
    """The schema as editors should check a config: a field with a unit also takes a quantity string of its
    dimension (`80GiB` for bytes, `32 GB/s` for a bandwidth), since the compiler converts it before checking."""
    return _with_quantities(load_schema(schema_name))


def _with_quantities(node: Any) -> Any:
    if isinstance(node, list):
        return [_with_quantities(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _with_quantities(value) for key, value in node.items()}
    if "x-unit" not in node:
        return node
    pattern = quantity_pattern(node["x-unit"])
    number = {key: value for key, value in node.items() if key not in _ANNOTATIONS}
    return {**{key: node[key] for key in node if key in _ANNOTATIONS},
            "anyOf": [number, {"type": "string", "pattern": pattern}]}


_ANNOTATIONS = ("description", "title", "x-unit", "default", "examples", "$comment")
