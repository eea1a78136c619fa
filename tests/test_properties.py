"""Property: any mutation of a valid config ends in a plan or in diagnostics, never an exception."""
from __future__ import annotations

import copy

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvreplay.compiler.load import load_bytes
from kvreplay.compiler.pipeline import compile_bytes

from . import fuzz
from .support import EXAMPLES

BASES = [load_bytes(p.read_bytes(), p.name).document for p in sorted(EXAMPLES.glob("*.yaml"))]
KEYS = sorted({k for base in BASES for k in orjson.dumps(base).decode().replace('"', " ").split() if k.isidentifier()})

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=False, width=32),
                    st.sampled_from(["auto", "fixed", "default", "cluster_shared", "vllm", "sglang", "max", "",
                                     "belady", "Qwen/Qwen3-8B", "moonshotai/Kimi-K3", "h100_sxm", "disaggregated"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
                      max_leaves=6)


def mutate(document, data):
    doc = copy.deepcopy(document)
    for _ in range(data.draw(st.integers(1, 4))):
        candidates = list(fuzz.paths(doc))
        if not candidates:
            break
        path = data.draw(st.sampled_from(candidates))
        parent = fuzz.parent_of(doc, path)
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = data.draw(values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][data.draw(st.sampled_from(KEYS))] = data.draw(values)
    return doc


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_configs_end_in_a_plan_or_diagnostics(data):
    base = data.draw(st.sampled_from(BASES))
    document = mutate(base, data)
    result = compile_bytes(orjson.dumps(document), "mutated.json")
    assert result.ok or result.diagnostics
    for diagnostic in result.diagnostics:
        assert diagnostic.code and diagnostic.message and diagnostic.span is not None
