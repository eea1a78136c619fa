"""Walk a JSON Schema along a document path: which subschemas apply to the value at a path.

Follows ``$ref``, ``anyOf``/``oneOf``/``allOf`` and ``if``/``then``/``else``, so a
path is known when any branch knows it (used to check `--set` paths and units).
"""
from __future__ import annotations

from .diagnostics import split_pointer


def applicable(schema: dict, root: dict) -> list[dict]:
    """`schema` and every subschema that applies to the same value ($ref, anyOf, allOf, then, ...)."""
    found, todo, seen = [], [schema], set()
    while todo:
        node = todo.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        found.append(node)
        if "$ref" in node:
            target = root
            for part in split_pointer(node["$ref"].removeprefix("#")):
                target = target[part]
            todo.append(target)
        todo.extend(sub for key in ("anyOf", "oneOf", "allOf") for sub in node.get(key, ()))
        todo.extend(node[key] for key in ("then", "else") if key in node)
    return found


def schema_step(schemas: list[dict], part: str | int, root: dict) -> list[dict]:
    """The schemas of `part` under any of `schemas` (empty if none of them has it)."""
    found = []
    for schema in schemas:
        extra = schema.get("additionalProperties")
        child = schema.get("items") if isinstance(part, int) else \
            schema.get("properties", {}).get(part, extra if isinstance(extra, dict) else None)
        found.extend(applicable(child, root) if isinstance(child, dict) else ())
    return found
