"""opal's defaults, applied to a checked opal document with their provenance.

The defaults are the `default` values of schema/opal.schema.json (one table: what `kvreplay schema`-style
tools show is what is applied).  Every object the schema describes is filled where the document leaves a
key out: the sections themselves (`router.router_params`, `simulation`, ...), each stage's
`workload_params` by its type (arrays are not walked, so stages are filled here), and each KVC tier
section that is present.  Returns the filled document and
``{pointer: "default(opal: <path> = <value>)"}`` for what was added; anything else the user wrote.
"""
from __future__ import annotations

import copy
from functools import lru_cache

import orjson

from ...diagnostics import join_pointer, pointer_to_dotted
from ....schema import OPAL, load_schema

SECTIONS = {"simulation": {}, "router": {"router_params": {}}, "kvc": {},
            "worker": {"worker_params": {}, "inference_params": {}}}


@lru_cache(maxsize=None)
def schema() -> dict:
    return load_schema(OPAL)


def _resolve(node: dict) -> dict:
    ref = node.get("$ref")
    return schema()["$defs"][ref.rsplit("/", 1)[-1]] if ref else node


def _fill(value: dict, node: dict, pointer: str, origin: dict) -> None:
    node = _resolve(node)
    for key, child in node.get("properties", {}).items():
        child = _resolve(child)
        where = pointer + join_pointer(key)
        if key not in value and "default" in child:
            value[key] = copy.deepcopy(child["default"])
            origin[where] = f"default(opal: {pointer_to_dotted(where)} = {orjson.dumps(child['default']).decode()})"
        if isinstance(value.get(key), dict) and child.get("type") == "object":
            _fill(value[key], child, where, origin)


def _stage_params(stage: dict) -> dict | None:
    for branch in schema()["$defs"]["stage"]["allOf"]:
        if branch["if"]["properties"]["type"]["const"] == stage.get("type"):
            return branch["then"]["properties"]["workload_params"]
    return None


def apply(document: dict) -> tuple[dict, dict]:
    """(the document with every default, provenance of each added value); the input is not changed."""
    filled, origin = copy.deepcopy(document), {}
    for section, inner in SECTIONS.items():
        if section not in filled:
            filled[section] = {}
            origin["/" + section] = f"default(opal: no `{section}` section)"
        for key in inner:
            if key not in filled[section]:
                filled[section][key] = {}
                origin[join_pointer(section, key)] = f"default(opal: no `{section}.{key}`)"
    _fill(filled, schema(), "", origin)
    for index, stage in enumerate(filled["workload"]["stages"]):
        params = _stage_params(stage)
        if params is not None:
            _fill(stage["workload_params"], params, join_pointer("workload", "stages", index, "workload_params"), origin)
    return filled, origin
