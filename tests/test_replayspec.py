"""The native ReplaySpec v1 front-end: checks with positions, lowering, golden plans, speed.

Valid examples live in golden/specs/replayspec/ (their compiled plans are golden
files under golden/replayspec-plans/); one negative file per ReplaySpec rule is
in golden/specs/negative/ (tests/test_negative_corpus.py).
"""
from __future__ import annotations

import copy
import json
import pickle
import time
from dataclasses import replace

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvreplay.compiler.diagnostics import locate
from kvreplay.compiler.frontends import fast_json
from kvreplay.compiler.frontends import replayspec as rs
from kvreplay.compiler.load import load_bytes
from kvreplay.compiler.passes import frontend
from kvreplay.compiler.schema_check import jsonschema_errors, strict_validator
from kvreplay.compiler.pipeline import compile_bytes, compile_file
from kvreplay.compiler.rules import all_rules
from kvreplay.compiler.spans import Span
from kvreplay.schema import PREDICT, REPLAYSPEC, load_schema

from .golden import golden_extension
from .support import ROOT, TRAFFIC, codes, compile_yaml

SPECS = ROOT / "golden" / "specs" / "replayspec"
SPEC_FILES = sorted(SPECS.glob("*.json"))
SECTION = "REFERENCE.md: Native ReplaySpec v1"


# ------------------------------------------------------------------ building specs as text

def request(rid: str, at: float, tokens: int = 4, **extra) -> dict:
    return {"id": rid, "arrival_time_ms": at, "input_tokens": tokens, "output_tokens": 8, **extra}


def with_ids(rid: str, at: float, ids: list[int], **extra) -> dict:
    return request(rid, at, len(ids), input_token_ids=ids, **extra)


def base(**top) -> dict:
    doc = {"version": 1,
           "topology": {"kind": "aggregated", "workers": {"initial_workers": 1}},
           "engine": {"model": "Qwen/Qwen3-8B", "hardware": "h100_sxm",
                      "workers": {"aggregated": {"kv_cache": {"block_size": 16,
                                                              "capacity": {"type": "fixed", "blocks": 4096}}}}},
           "requests": [request("r0", 0.0), request("r1", 20.0)]}
    doc.update(top)
    return doc


def belady(**top) -> dict:
    doc = base(requests=[with_ids("r0", 0.0, [1, 2, 3, 4]), with_ids("r1", 20.0, [1, 2, 3, 4, 5, 6])], **top)
    doc["engine"]["kv_eviction_policy"] = "belady"
    return doc


def disaggregated(**top) -> dict:
    doc = base(**top)
    doc["topology"] = {"kind": "disaggregated", "prefill": {"initial_workers": 2}, "decode": {"initial_workers": 1}}
    kv = doc["engine"]["workers"].pop("aggregated")
    doc["engine"]["workers"] = {"prefill": copy.deepcopy(kv), "decode": copy.deepcopy(kv)}
    return doc


def text_of(doc: dict) -> str:
    """Two-space JSON with one request per line (what the positions below are computed against)."""
    doc = dict(doc)
    requests = doc.pop("requests")
    head = json.dumps(doc, indent=2)[:-2]
    rows = ",\n".join("    " + json.dumps(r) for r in requests)
    return head + ',\n  "requests": [\n' + rows + "\n  ]\n}\n"


def compile_doc(doc: dict):
    text = text_of(doc)
    return text, compile_bytes(text.encode(), "spec.json")


def at(text: str, fragment: str, skip: str = "", nth: int = 1) -> Span:
    """Position of `fragment` (its nth occurrence), moved past its prefix `skip`."""
    index = -1
    for _ in range(nth):
        index = text.index(fragment, index + 1)
    index += len(skip)
    line = text.count("\n", 0, index) + 1
    return Span(line, index - (text.rfind("\n", 0, index) + 1) + 1)


def value_at(text: str, key: str, value: str, nth: int = 1) -> Span:
    return at(text, f'"{key}": {value}', f'"{key}": ', nth)


def blamed(result) -> list[tuple[str, str, Span]]:
    return [(d.code, d.pointer, d.span) for d in result.diagnostics]


# ------------------------------------------------------------------ valid specs and their plans

@pytest.fixture
def golden_plans(snapshot):
    return snapshot.use_extension(golden_extension("replayspec-plans"))


def test_there_are_valid_examples():
    assert {p.stem for p in SPEC_FILES} >= {"aggregated-belady", "aggregated-lengths", "disaggregated"}


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_example_plan_is_golden(path, golden_plans):
    result = compile_file(path)
    assert result.ok, result.diagnostics
    assert result.stage == ""
    assert orjson.loads(result.plan.canonical_json()) == golden_plans(name=path.stem)


def test_plan_bytes_do_not_depend_on_key_order_or_run():
    doc = base(max_in_flight=3, max_sim_time_ms=2500)
    reordered = {k: doc[k] for k in reversed(list(doc))}
    reordered["requests"] = [{k: r[k] for k in reversed(list(r))} for r in doc["requests"]]
    plans = {compile_doc(d)[1].plan.canonical_json() for d in (doc, reordered, doc)}
    assert len(plans) == 1
    assert plans.pop().endswith(b"}\n")


# ------------------------------------------------------------------ lowering

def test_aggregated_lowering():
    doc = base(max_in_flight=4, max_sim_time_ms=1500, record_per_request=True,
               description="free text is allowed and dropped")
    doc["topology"]["workers"] = {"initial_workers": 3, "startup_delay_ms": 250}
    _, result = compile_doc(doc)
    assert result.ok, result.diagnostics
    plan, spec = result.plan.to_dict(), result.spec
    assert plan["frontend"] == spec.frontend == "replayspec"
    assert plan["engine"]["mode"] == "aggregated"
    assert plan["engine"]["workers"]["aggregated"]["parallelism"]["replicas"] == 3
    assert plan["traffic"] == {
        "source": {"type": "requests", "requests": doc["requests"]},
        "load": {"type": "replay", "max_in_flight": 4},
        "replay": {"max_virtual_time_seconds": 1.5, "record_per_request": True,
                   "startup_delay_ms": {"aggregated": 250}},
    }
    assert plan["provenance"]["/engine/mode"] == "inferred(topology.kind)"
    assert plan["provenance"]["/engine/workers/aggregated/parallelism/replicas"] == \
        "inferred(topology.workers.initial_workers)"
    assert plan["provenance"]["/traffic/replay/max_virtual_time_seconds"] == "inferred(max_sim_time_ms / 1000)"
    assert "description" not in orjson.dumps(plan).decode()


def test_open_loop_lengths_only_lowering_is_minimal():
    doc = base()
    del doc["topology"]["workers"]
    _, result = compile_doc(doc)
    assert result.ok, result.diagnostics
    traffic = result.plan.to_dict()["traffic"]
    assert traffic == {"source": {"type": "requests", "requests": doc["requests"]}, "load": {"type": "replay"}}
    assert result.plan.to_dict()["engine"]["workers"]["aggregated"]["parallelism"]["replicas"] == 1  # the default


def test_written_replicas_are_kept_and_stay_the_users():
    doc = base()
    doc["topology"]["workers"]["initial_workers"] = 2
    doc["engine"]["workers"]["aggregated"]["parallelism"] = {"replicas": 2}
    _, result = compile_doc(doc)
    assert result.ok, result.diagnostics
    assert result.spec.provenance("/engine/workers/aggregated/parallelism/replicas") == "user"


def test_disaggregated_lowering():
    doc = disaggregated()
    doc["topology"]["prefill"]["startup_delay_ms"] = 1000
    doc["topology"]["handoff_latency_ms"] = 0.25
    doc["requests"][0]["prefill_dp_rank"] = 0
    _, result = compile_doc(doc)
    assert result.ok, result.diagnostics
    plan = result.plan.to_dict()
    assert plan["engine"]["mode"] == "disaggregated"
    assert {r: plan["engine"]["workers"][r]["parallelism"]["replicas"] for r in ("prefill", "decode")} == \
        {"prefill": 2, "decode": 1}
    assert plan["engine"]["kv_transfer"]["timing_mode"] == "destination_missing"  # predict defaults still apply
    assert plan["traffic"]["replay"] == {"handoff_latency_ms": 0.25, "startup_delay_ms": {"prefill": 1000}}
    assert set(plan["geometry"]) == {"prefill", "decode"}


def test_topology_pools_become_roles_when_the_engine_has_none():
    doc = disaggregated()
    del doc["engine"]["workers"]
    _, result = compile_doc(doc)
    assert result.ok, result.diagnostics
    assert set(result.plan.to_dict()["engine"]["workers"]) == {"prefill", "decode"}


def test_requests_are_immutable_records():
    doc = belady()
    doc["requests"][1]["kv_hints"] = [{"rank": 0, "cached_tokens": 4}]
    _, result = compile_doc(doc)
    assert result.ok, result.diagnostics
    requests = result.spec.get("/traffic/source/requests")
    assert isinstance(requests, fast_json.FrozenList) and isinstance(requests[0], fast_json.FrozenDict)
    assert isinstance(requests[1]["input_token_ids"], fast_json.FrozenList)
    assert isinstance(requests[1]["kv_hints"][0], fast_json.FrozenDict)
    for mutate in (lambda: requests.append({}), lambda: requests[0].update(id="x"),
                   lambda: requests[0].__setitem__("id", "x"), lambda: requests[1]["input_token_ids"].sort()):
        with pytest.raises(TypeError):
            mutate()
    assert requests == doc["requests"]
    assert pickle.loads(pickle.dumps(requests)) == requests and copy.deepcopy(requests) == requests
    assert hash(requests) == hash(rs.freeze_requests(doc["requests"]))


def test_predict_yaml_does_not_accept_the_replay_variants():
    base_yaml = "engine:\n  model: Qwen/Qwen3-8B\n  hardware: h100_sxm\n"
    result = compile_yaml(base_yaml + "traffic:\n  source: {type: requests, requests: []}\n"
                          "  load: {type: replay}\n  stop: {requests: 1}\n")
    assert codes(result) == {"SCHEMA-ENUM"}
    assert {d.pointer for d in result.diagnostics} == {"/traffic/source/type", "/traffic/load/type"}
    assert codes(compile_yaml(base_yaml + "  kv_eviction_policy: belady\n" + TRAFFIC)) == {"BELADY-PREDICT"}


def test_detection():
    assert frontend.detect({"version": 1, "requests": []}) == "replayspec"
    assert frontend.detect({"version": 1, "topology": {}}) == "replayspec"
    assert frontend.detect({"engine": {}}) == "predict"
    assert frontend.detect({"worker": {"vllm_params": {}}}) == "opal"
    result = compile_bytes(b'{"worker": {"vllm_params": {}}}', "opal.json")  # (the opal front-end's own schema)
    assert codes(result) == {"SCHEMA-REQUIRED"}


# ------------------------------------------------------------------ the checks, with positions

def test_version_is_checked_first_and_alone():
    doc = base(version=2, bogus_key=1)
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-VERSION", "/version", value_at(text, "version", "2"))]
    assert result.stage == "frontend"
    _, result = compile_doc(base(version="1"))
    assert codes(result) == {"SCHEMA-TYPE"}


def test_times_must_be_finite_and_not_negative():
    doc = base(max_sim_time_ms=0)
    doc["requests"] = [request("r0", -0.5), request("r1", "@"), request("r2", 3.0)]
    doc["topology"]["workers"]["startup_delay_ms"] = -1
    text = text_of(doc).replace('"@"', "1e999")  # JSON holds no Infinity, but this exponent overflows to it
    result = compile_bytes(text.encode(), "spec.json")
    assert blamed(result) == [
        ("REPLAYSPEC-TIME", "/topology/workers/startup_delay_ms", value_at(text, "startup_delay_ms", "-1")),
        ("REPLAYSPEC-TIME", "/max_sim_time_ms", value_at(text, "max_sim_time_ms", "0")),
        ("REPLAYSPEC-TIME", "/requests/0/arrival_time_ms", value_at(text, "arrival_time_ms", "-0.5")),
        ("REPLAYSPEC-TIME", "/requests/1/arrival_time_ms", value_at(text, "arrival_time_ms", "1e999")),
    ]
    rule = {r.id: r for r in all_rules()}["REPLAYSPEC-TIME"]
    assert result.diagnostics[0].message == rule.message and result.diagnostics[0].hint == rule.hint


@pytest.mark.parametrize("written", ["1e999", "-1e999", "5e-324", "-3"])
def test_max_sim_time_edge_values(written):
    text = text_of(base(max_sim_time_ms="@")).replace('"@"', written)
    result = compile_bytes(text.encode(), "spec.json")
    assert blamed(result) == [("REPLAYSPEC-TIME", "/max_sim_time_ms", value_at(text, "max_sim_time_ms", written))]


def test_handoff_latency_is_a_time():
    doc = disaggregated()
    doc["topology"]["handoff_latency_ms"] = -2.5
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-TIME", "/topology/handoff_latency_ms",
                               value_at(text, "handoff_latency_ms", "-2.5"))]


@pytest.mark.parametrize("cap", [0, -3])
def test_max_in_flight_must_be_positive(cap):
    text, result = compile_doc(base(max_in_flight=cap))
    assert blamed(result) == [("REPLAYSPEC-MAX-IN-FLIGHT", "/max_in_flight", value_at(text, "max_in_flight", str(cap)))]


def test_duplicate_ids_blame_every_later_occurrence():
    doc = base(requests=[request("a", 0), request("b", 1), request("a", 2), request("a", 3)])
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-DUPLICATE-ID", "/requests/2/id", value_at(text, "id", '"a"', nth=2)),
                              ("REPLAYSPEC-DUPLICATE-ID", "/requests/3/id", value_at(text, "id", '"a"', nth=3))]


def test_prefill_dp_rank_only_when_disaggregated():
    doc = base(requests=[request("r0", 0, prefill_dp_rank=0), request("r1", 1)])
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-PREFILL-DP-RANK", "/requests/0/prefill_dp_rank",
                               value_at(text, "prefill_dp_rank", "0"))]
    doc = disaggregated(requests=[request("r0", 0, prefill_dp_rank=0), request("r1", 1)])
    assert compile_doc(doc)[1].ok


def test_token_ids_must_match_input_tokens():
    doc = base(requests=[with_ids("r0", 0, [1, 2, 3]), request("r1", 1, 5, input_token_ids=[1, 2])])
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-TOKEN-IDS", "/requests/1/input_token_ids",  # (a list: at its key)
                               at(text, '"input_token_ids": [1, 2]'))]


def test_engine_mode_must_match_the_topology():
    doc = base()
    doc["engine"]["mode"] = "disaggregated"
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-ENGINE-MODE", "/engine/mode", value_at(text, "mode", '"disaggregated"'))]
    doc["engine"]["mode"] = "aggregated"
    _, result = compile_doc(doc)
    assert result.ok and result.spec.provenance("/engine/mode") == "user"


def test_initial_workers_must_match_written_replicas():
    doc = disaggregated()
    doc["engine"]["workers"]["prefill"]["parallelism"] = {"replicas": 3}
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-INITIAL-WORKERS", "/topology/prefill/initial_workers",
                               value_at(text, "initial_workers", "2"))]


def test_dp_rank_must_be_below_attention_data():
    doc = base(requests=[request("r0", 0, dp_rank=1), request("r1", 1, dp_rank=2)])
    doc["engine"]["workers"]["aggregated"]["parallelism"] = {"attention_data": 2}
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-DP-RANK", "/requests/1/dp_rank", value_at(text, "dp_rank", "2"))]
    assert result.stage == "rules"


def test_dp_ranks_of_both_roles_when_disaggregated():
    doc = disaggregated(requests=[request("r0", 0, dp_rank=1, prefill_dp_rank=1), request("r1", 1, dp_rank=0)])
    doc["engine"]["workers"]["decode"]["parallelism"] = {"attention_data": 2}
    text, result = compile_doc(doc)
    assert blamed(result) == [("REPLAYSPEC-DP-RANK", "/requests/0/prefill_dp_rank",
                               value_at(text, "prefill_dp_rank", "1"))]


def test_belady_valid_spec_compiles():
    _, result = compile_doc(belady())
    assert result.ok, result.diagnostics
    assert result.plan.to_dict()["engine"]["kv_eviction_policy"] == "belady"


def test_belady_needs_an_open_loop():
    text, result = compile_doc(belady(max_in_flight=4))
    assert blamed(result) == [("BELADY-OPEN-LOOP", "/max_in_flight", value_at(text, "max_in_flight", "4"))]


def test_belady_needs_token_ids_on_every_request():
    doc = belady()
    doc["requests"].append(request("r2", 30.0))
    text, result = compile_doc(doc)
    assert blamed(result) == [("BELADY-TOKEN-IDS", "/requests/2", at(text, '{"id": "r2"'))]


def test_belady_rejects_prefix_match_unit():
    doc = belady()
    doc["engine"]["workers"]["aggregated"]["kv_cache"] = {
        "block_size": 64, "bytes_per_token": 16, "capacity": {"type": "fixed", "bytes": 65536},
        "state_cache": {"bytes_per_request": 1500}, "prefix_match_unit": 16}
    text, result = compile_doc(doc)
    assert blamed(result) == [("BELADY-PREFIX-MATCH-UNIT", "/engine/workers/aggregated/kv_cache/prefix_match_unit",
                               value_at(text, "prefix_match_unit", "16"))]


def test_belady_on_lowered_roles_points_at_the_topology():
    doc = disaggregated()
    del doc["engine"]["workers"]
    doc["engine"]["kv_eviction_policy"] = "belady"
    doc["requests"] = belady()["requests"]
    text, result = compile_doc(doc)
    assert [(d.code, d.pointer) for d in result.diagnostics] == [("BELADY-AGGREGATED", "/engine/workers/decode"),
                                                                 ("BELADY-AGGREGATED", "/engine/workers/prefill")]
    # the pipeline locates with the source document's table: the nearest written ancestor, `engine`
    assert {d.span for d in result.diagnostics} == {value_at(text, "engine", "{")}
    # the lowered Spec's table maps the roles the lowering created back to their topology pools
    located = locate([replace(d, span=None) for d in result.diagnostics], result.spec.spans, "spec.json")
    assert [(d.pointer, d.span) for d in located] == [
        ("/engine/workers/prefill", value_at(text, "prefill", "{")),
        ("/engine/workers/decode", value_at(text, "decode", "{")),
    ]


@pytest.mark.parametrize("change, rule", [
    (lambda d: d["engine"]["workers"]["aggregated"].update(parallelism={"attention_data": 2}), "BELADY-ATTENTION-DATA"),
    (lambda d: d["engine"]["workers"]["aggregated"]["kv_cache"].update(host_offload={"num_host_blocks": 64}),
     "BELADY-OFFLOAD"),
    (lambda d: d["engine"]["workers"]["aggregated"]["kv_cache"].update(prefix_caching=False), "BELADY-PREFIX-CACHING"),
])
def test_existing_belady_constraints_fire_for_replayspecs(change, rule):
    doc = belady()
    change(doc)
    assert codes(compile_doc(doc)[1]) == {rule}


def test_every_replayspec_rule_is_data_with_a_section():
    rules = {r.id: r for r in all_rules()}
    ours = [r for r in rules.values() if r.id.startswith("REPLAYSPEC-")]
    assert {r.id for r in ours} >= {"REPLAYSPEC-VERSION", "REPLAYSPEC-TIME", "REPLAYSPEC-MAX-IN-FLIGHT",
                                    "REPLAYSPEC-DUPLICATE-ID", "REPLAYSPEC-PREFILL-DP-RANK", "REPLAYSPEC-TOKEN-IDS",
                                    "REPLAYSPEC-DP-RANK"}
    assert all(r.section == SECTION and r.message and r.hint for r in ours)
    assert {"BELADY-OPEN-LOOP", "BELADY-TOKEN-IDS", "BELADY-PREFIX-MATCH-UNIT"} <= set(rules)
    assert {r.stage for r in ours} == {"frontend", "spec"}


# ------------------------------------------------------------------ the schema

def test_unknown_top_level_key_suggests_and_points_at_the_key():
    text, result = compile_doc(base(max_in_flite=3))
    (d,) = result.diagnostics
    assert (d.code, d.pointer, d.hint, d.span) == ("SCHEMA-UNKNOWN-KEY", "/max_in_flite",
                                                   "did you mean `max_in_flight`?", at(text, '"max_in_flite"'))


def test_engine_block_is_the_predict_engine_by_ref():
    doc = base()
    doc["engine"]["backend"] = "vlm"
    doc["engine"]["workers"]["aggregated"]["kv_cache"]["blok_size"] = 16
    text, result = compile_doc(doc)
    assert [(d.code, d.pointer, d.hint, d.span) for d in result.diagnostics] == [
        ("SCHEMA-UNKNOWN-KEY", "/engine/workers/aggregated/kv_cache/blok_size", "did you mean `block_size`?",
         at(text, '"blok_size"')),
        ("SCHEMA-ENUM", "/engine/backend", "did you mean `vllm`?", value_at(text, "backend", '"vlm"'))]


def test_request_fields_are_strict_and_positioned():
    doc = base(requests=[request("r0", 0), request("r1", 1)] * 3)
    doc["requests"] = [dict(r, id=f"r{i}") for i, r in enumerate(doc["requests"])]
    doc["requests"][4] = dict(doc["requests"][4], input_tokens=16.0, kv_hints=[{"rank": 0, "rnak": 1}])
    text, result = compile_doc(doc)
    assert [(d.code, d.pointer, d.hint) for d in result.diagnostics] == [
        ("SCHEMA-TYPE", "/requests/4/input_tokens", "write 16 (integers are strict: no decimal point)"),
        ("SCHEMA-UNKNOWN-KEY", "/requests/4/kv_hints/0/rnak", "did you mean `rank`?")]
    assert result.diagnostics[0].span == value_at(text, "input_tokens", "16.0")


def test_topology_variant_is_picked_by_kind():
    doc = base()
    doc["topology"] = {"kind": "disaggregated", "prefill": {}}
    _, result = compile_doc(doc)
    assert [(d.code, d.pointer) for d in result.diagnostics] == [("SCHEMA-REQUIRED", "/topology/decode")]
    doc["topology"] = {"kind": "aggregated", "prefill": {}}
    _, result = compile_doc(doc)
    assert [(d.code, d.pointer) for d in result.diagnostics] == [("SCHEMA-UNKNOWN-KEY", "/topology/prefill")]


def test_lowered_schema_extends_only_the_replayspec_path():
    schema = rs.lowered_schema()
    assert "requests" in schema["$defs"]["source"]["properties"]["type"]["enum"]
    assert "replay" in schema["$defs"]["load"]["properties"]["type"]["enum"]
    assert "requests" not in load_schema(PREDICT)["$defs"]["source"]["properties"]["type"]["enum"]


def test_lowered_spans_map_back_to_the_source():
    doc = belady(max_in_flight=2, max_sim_time_ms=10)
    spans = rs.lower(load_bytes(text_of(doc).encode(), "s.json"), "s.json").spans
    assert spans.source_pointer("/traffic/source/requests/1/id") == "/requests/1/id"
    assert spans.source_pointer("/traffic/load/max_in_flight") == "/max_in_flight"
    assert spans.source_pointer("/traffic/replay/max_virtual_time_seconds") == "/max_sim_time_ms"
    assert spans.source_pointer("/engine/mode") == "/topology/kind"
    assert spans.source_pointer("/engine/workers/aggregated/parallelism/replicas") == \
        "/topology/workers/initial_workers"
    assert spans.source_pointer("/engine/workers/aggregated/kv_cache") == "/engine/workers/aggregated/kv_cache"


# ------------------------------------------------------------------ the fast request check agrees with jsonschema

REQUEST_KEYS = ["id", "arrival_time_ms", "input_tokens", "input_token_ids", "output_tokens", "dp_rank",
                "prefill_dp_rank", "session_id", "turn_index", "kv_hints", "bogus"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**33), st.floats(allow_nan=False),
                    st.text(max_size=3))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["rank", "worker_idx", "cached_tokens", "x"]), inner, max_size=3)), max_leaves=8)
requests_ = st.dictionaries(st.sampled_from(REQUEST_KEYS), values, max_size=8)
good = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=4), "arrival_time_ms": st.floats(0, 1e9), "input_tokens": st.integers(1, 99),
     "output_tokens": st.integers(1, 99)},
    optional={"input_token_ids": st.lists(st.integers(0, 2**32 - 1), max_size=6), "dp_rank": st.integers(0, 9),
              "kv_hints": st.lists(st.fixed_dictionaries({"rank": st.integers(0, 9)}), max_size=2),
              "session_id": st.text(min_size=1, max_size=3), "turn_index": st.integers(0, 9)})


def request_validator():
    return strict_validator({"$ref": load_schema(REPLAYSPEC)["$id"] + "#/$defs/request"})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(requests_, good))
def test_fast_check_never_vouches_for_an_invalid_request(value):
    if rs.request_check()(value):
        assert jsonschema_errors(request_validator(), value) == []
    if not jsonschema_errors(request_validator(), value):  # and it vouches for the valid ones
        assert rs.request_check()(value), value


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_mutation_of_a_replayspec_ends_in_a_plan_or_diagnostics(data):
    doc = copy.deepcopy(data.draw(st.sampled_from([base(), belady(max_sim_time_ms=100), disaggregated()])))
    for _ in range(data.draw(st.integers(1, 3))):
        node = doc
        while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
            key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            if not isinstance(node[key], (dict, list)):
                break
            node = node[key]
        if isinstance(node, dict) and node:
            node[data.draw(st.sampled_from(sorted(node) + REQUEST_KEYS + ["max_in_flight", "kind"]))] = \
                data.draw(values)
        elif isinstance(node, list) and node:
            node[data.draw(st.integers(0, len(node) - 1))] = data.draw(values)
    result = compile_bytes(orjson.dumps(doc), "mutated.json")
    assert result.ok or result.diagnostics
    if result.ok:
        orjson.loads(result.plan.canonical_json())
    for d in result.diagnostics:
        assert d.span is not None and d.message and d.hint


# ------------------------------------------------------------------ speed

def generated(n: int, token_ids: int = 0, policy: str = "lru") -> bytes:
    requests = []
    for i in range(n):
        r = {"id": f"req-{i}", "arrival_time_ms": i * 0.75, "input_tokens": token_ids or 512, "output_tokens": 16,
             "session_id": f"s{i % 50}", "turn_index": i // 50}
        if token_ids:
            r["input_token_ids"] = [(i * 7 + k) % 151936 for k in range(token_ids)]
        requests.append(r)
    doc = base(requests=requests)
    doc["engine"]["kv_eviction_policy"] = policy
    return orjson.dumps(doc)


@pytest.mark.parametrize("token_ids, policy", [(0, "lru"), (64, "belady")], ids=["lengths-only", "belady-64-ids"])
def test_ten_thousand_requests_compile_fast(token_ids, policy):
    data = generated(10_000, token_ids, policy)
    compile_bytes(generated(2), "warm.json")  # schemas and validators are built once per process
    # (CPU time of this process: the bound is on the compiler's cost, not on what else the machine runs)
    start = time.process_time()
    result = compile_bytes(data, "big.json")
    plan = result.plan.canonical_json() if result.ok else b""
    elapsed = time.process_time() - start
    assert result.ok, result.diagnostics[:3]
    assert len(orjson.loads(plan)["traffic"]["source"]["requests"]) == 10_000
    assert elapsed < 2.0, f"compiling 10,000 requests took {elapsed:.2f} s"


def test_one_bad_request_among_ten_thousand_is_found_fast():
    doc = orjson.loads(generated(10_000))
    doc["requests"][7777]["output_tokens"] = 0
    start = time.perf_counter()
    errors = rs.source_schema_errors(doc)
    assert time.perf_counter() - start < 1.0
    assert [(d.code, d.pointer) for d in errors] == [("SCHEMA-RANGE", "/requests/7777/output_tokens")]
