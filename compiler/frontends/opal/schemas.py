"""The two schemas of the opal front-end: the opal document's own, and the lowered Spec's.

`source_errors` checks an opal config against schema/opal.schema.json (unknown keys with "did you
mean", strict integers, finite ranges: the project's schema diagnostics).  `lowered_schema` is the
predict schema extended in code with what only this front-end writes: the `opal-stages` source, the
`stages` load, and the top-level `opal` section (the opal document with defaults, its `derived`
numbers and `config_json`), so predict YAML still rejects all three.
"""
from __future__ import annotations

import copy
from functools import lru_cache

from ...diagnostics import Diagnostic
from ....schema import OPAL, PREDICT, load_schema
from ...schema_check import errors_of, strict_validator

INTEGER = {"type": "integer", "minimum": 0, "maximum": 2 ** 63 - 1}
DERIVED = {
    "type": "object", "additionalProperties": False,
    "description": "opal's model and block-pool numbers (spec/opal-reference.md).",
    "properties": {"model_config": {"type": "string"}, "params": INTEGER, "model_bytes": INTEGER,
                   "bytes_per_param": {"type": "number", "minimum": 0, "maximum": 8},
                   "kv_bytes_per_token": INTEGER, "total_gpu_blocks": INTEGER,
                   "max_position_embeddings": {"anyOf": [INTEGER, {"type": "null"}]}},
    "required": ["model_config", "params", "model_bytes", "bytes_per_param", "kv_bytes_per_token", "total_gpu_blocks"]}


@lru_cache(maxsize=None)
def source_validator():
    return strict_validator(load_schema(OPAL))


def source_errors(document: dict) -> list[Diagnostic]:
    return errors_of(source_validator(), document)


@lru_cache(maxsize=None)
def lowered_schema() -> dict:
    schema = copy.deepcopy(load_schema(PREDICT))
    opal = load_schema(OPAL)
    schema["$id"] = schema["$id"].replace(PREDICT, "opal-lowered.schema.json")
    schema["title"] = "kvreplay canonical Spec lowered from an opal config"
    schema["required"] = ["engine", "traffic", "opal"]
    schema["properties"].pop("recommend", None)
    defs = schema["$defs"]
    clash = set(defs) & set(opal["$defs"])
    assert not clash, f"opal definitions clash with the predict schema's: {sorted(clash)}"
    defs.update(copy.deepcopy(opal["$defs"]))  # (the opal sections' `#/$defs/...` references resolve here)
    defs["opal"] = {"type": "object", "additionalProperties": False,
                    "properties": {**copy.deepcopy(opal["properties"]), "derived": DERIVED,
                                   "config_json": {"type": "string"}},
                    "required": ["simulation", "model", "router", "workload", "worker", "kvc", "derived",
                                 "config_json"]}
    schema["properties"]["opal"] = {"$ref": "#/$defs/opal"}
    defs["source_opal_stages"] = {"type": "object", "additionalProperties": False, "required": ["type"],
                                  "properties": {"type": {"const": "opal-stages"}}}
    defs["load_stages"] = {"type": "object", "additionalProperties": False, "required": ["type"],
                           "properties": {"type": {"const": "stages"}}}
    for variant, name, key in (("source", "source_opal_stages", "opal-stages"), ("load", "load_stages", "stages")):
        defs[variant]["properties"]["type"]["enum"].append(key)
        defs[variant]["allOf"].append({"if": {"properties": {"type": {"const": key}}, "required": ["type"]},
                                       "then": {"$ref": f"#/$defs/{name}"}})
    return schema


@lru_cache(maxsize=None)
def lowered_validator():
    return strict_validator(lowered_schema())
