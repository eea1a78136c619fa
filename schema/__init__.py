"""JSON Schema 2020-12 documents (data) and a cached loader for them."""
from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

import orjson

PREDICT = "predict.schema.json"
REPLAYSPEC = "replayspec.schema.json"  # native ReplaySpec v1; its `engine` is $ref'd from PREDICT
OPAL = "opal.schema.json"  # IBM opal simulator JSON configs (compiler/frontends/opal/)


@lru_cache(maxsize=None)
def load_schema(name: str = PREDICT) -> dict:
    return orjson.loads(files(__package__).joinpath(name).read_bytes())


def schema_text(name: str = PREDICT) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")
