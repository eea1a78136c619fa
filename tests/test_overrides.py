"""`--set PATH=VALUE` overrides: grammar, units, schema paths, application, diagnostics."""
from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.compiler.diagnostics import CompileError
from kvreplay.compiler.load import load_yaml
from kvreplay.compiler.overrides import (Override, Quantity, UnitError, apply_overrides, convert, parse_override,
                                         parse_quantity)
from kvreplay.compiler.spans import Span

CONFIG = """\
engine:
  model: Qwen/Qwen3-32B-FP8
  hardware: h200_sxm
  workers:
    aggregated:
      kv_cache:
        block_size: 16
traffic:
  source:
    type: trace
    paths: [a.jsonl, b.jsonl]
"""
KV = "engine.workers.aggregated.kv_cache"
KV_POINTER = "/engine/workers/aggregated/kv_cache"


@pytest.fixture
def loaded():
    return load_yaml(CONFIG)


def apply(loaded, *overrides):
    return apply_overrides(loaded.document, loaded.spans, overrides)


def value_of(text: str):
    return parse_override(f"a={text}", 1).value


def diagnostics_of(loaded, *overrides):
    with pytest.raises(CompileError) as caught:
        apply(loaded, *overrides)
    return caught.value.diagnostics


# ------------------------------------------------------------------ value kinds

@pytest.mark.parametrize("text, expected", [
    ("16", 16), ("-3", -3), ("+7", 7), ("0", 0),
    ("1.5", 1.5), ("-0.25", -0.25), ("2.", 2.0), (".5", 0.5), ("1e3", 1000.0), ("6.02E-2", 0.0602),
    ("true", True), ("True", True), ("false", False), ("FALSE", False),
    ("null", None), ("~", None), ("Null", None),
    ('"hello world"', "hello world"), ('"a\\"b\\\\c\\nd\\te\\u00e9"', 'a"b\\c\nd\te\u00e9'), ('""', ""),
    ("'it''s'", "it's"), ("'16'", "16"), ("'true'", "true"),
    ("sglang", "sglang"), ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B-FP8"), ("  padded  ", "padded"),
    ("hello world", "hello world"), ("80abc", "80abc"), ("1.2.3", "1.2.3"), ("true story", "true story"),
    ("~x", "~x"), ("80 GiBs", "80 GiBs"), ("1, 2", "1, 2"),
])
def test_scalar_values(text, expected):
    value = value_of(text)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize("text, expected", [
    ("80GiB", Quantity(80, "GiB")), ("80 GiB", Quantity(80, "GiB")), ("1.5ms", Quantity(1.5, "ms")),
    ("32 GB/s", Quantity(32, "GB/s")), ("4Gb/s", Quantity(4, "Gb/s")), ("1e3 ns", Quantity(1000.0, "ns")),
    ("2 min", Quantity(2, "min")), ("512B", Quantity(512, "B")),
])
def test_quantity_values_keep_their_unit_until_applied(text, expected):
    assert value_of(text) == expected


def test_flow_list_and_map_nest():
    assert value_of("[1, 2.5, x y, true, ~, 'q', [3, []], {k: v}]") == \
        [1, 2.5, "x y", True, None, "q", [3, []], {"k": "v"}]
    assert value_of('{a: 1, "b c": [x, 2GiB], d: {e: null}, f: {}}') == \
        {"a": 1, "b c": ["x", Quantity(2, "GiB")], "d": {"e": None}, "f": {}}
    assert value_of("[1, 2,]") == [1, 2]
    assert value_of("[]") == [] and value_of("{}") == {}


def test_override_records_path_pointer_and_columns():
    override = parse_override("traffic.source.paths[1]={k: [1, x]}", 3)
    assert isinstance(override, Override)
    assert override.path == ("traffic", "source", "paths", 1)
    assert override.pointer == "/traffic/source/paths/1"
    assert override.part_columns == (1, 9, 16, 22)
    assert override.value_columns == {"": 25, "/k": 29, "/k/0": 30, "/k/1": 33}
    assert override.source == "--set #3"


# ------------------------------------------------------------------ quantities and units

def test_parse_quantity():
    assert parse_quantity("80 GiB") == (80, "GiB")
    assert parse_quantity("1.5ms") == (1.5, "ms")
    assert parse_quantity(" 32 GB/s ") == (32, "GB/s")
    assert parse_quantity("80") == (80, None)
    with pytest.raises(CompileError) as caught:
        parse_quantity("80 parsecs")
    assert caught.value.diagnostics[0].code == "QUANTITY-SYNTAX"


@pytest.mark.parametrize("text, target, integer, expected", [
    ("512B", "B", True, 512), ("4KB", "B", True, 4000), ("3MB", "B", True, 3_000_000),
    ("80GB", "B", True, 80_000_000_000), ("2TB", "B", True, 2_000_000_000_000),
    ("4KiB", "B", True, 4096), ("3MiB", "B", True, 3_145_728), ("80GiB", "B", True, 85_899_345_920),
    ("2TiB", "B", True, 2_199_023_255_552), ("1.5KiB", "B", True, 1536), ("1.1GB", "B", True, 1_100_000_000),
    ("32 GB/s", "GB/s", False, 32.0), ("500MB/s", "GB/s", False, 0.5), ("2TB/s", "GB/s", False, 2000.0),
    ("4Gb/s", "GB/s", False, 0.5), ("400 Gb/s", "GB/s", False, 50.0), ("1GiB/s", "GB/s", False, 1.073741824),
    ("1.5ms", "ms", False, 1.5), ("250us", "ms", False, 0.25), ("2500000ns", "ms", False, 2.5),
    ("2s", "ms", False, 2000.0), ("1min", "ms", False, 60000.0), ("2 min", "s", False, 120.0),
    ("750ms", "s", False, 0.75),
])
def test_convert_every_unit(text, target, integer, expected):
    value = convert(parse_quantity(text), target, integer=integer)
    assert value == expected
    assert type(value) is type(expected)


def test_convert_refuses_other_dimensions_fractions_and_unitless_fields():
    with pytest.raises(UnitError, match=r"`32GB/s` is a bandwidth but `capacity.bytes` takes bytes"):
        convert(Quantity(32, "GB/s"), "B", integer=True, field="capacity.bytes")
    with pytest.raises(UnitError, match="is a size but .* takes a duration"):
        convert(Quantity(1, "GiB"), "ms")
    with pytest.raises(UnitError, match="1.5 B.*whole number"):
        convert(Quantity(1.5, "B"), "B", integer=True)
    with pytest.raises(UnitError, match="takes a plain number"):
        convert(Quantity(3, "s"), None)
    assert convert(Quantity(7, None), "B", integer=True) == 7


# ------------------------------------------------------------------ applying

def test_units_follow_the_schema_x_unit(loaded):
    document, _ = apply(
        loaded,
        f"{KV}.capacity.bytes=80GiB",
        f"{KV}.host_offload.d2h_bandwidth_gbps=32 GB/s",
        f"{KV}.host_offload.h2d_bandwidth_gbps=4Gb/s",
        f"{KV}.host_offload.latency_to_first_byte_ms=1.5ms",
        f"{KV}.g3_offload.latency_to_first_byte_ms=250us",
        f"{KV}.bytes_per_token=1KiB",
        "traffic.stop.max_virtual_time_seconds=2min",
    )
    kv = document["engine"]["workers"]["aggregated"]["kv_cache"]
    assert kv["capacity"] == {"bytes": 85899345920}
    assert kv["host_offload"] == {"d2h_bandwidth_gbps": 32.0, "h2d_bandwidth_gbps": 0.5,
                                  "latency_to_first_byte_ms": 1.5}
    assert kv["g3_offload"] == {"latency_to_first_byte_ms": 0.25}
    assert kv["bytes_per_token"] == 1024  # anyOf ["auto", integer] with x-unit on the anyOf
    assert document["traffic"]["stop"] == {"max_virtual_time_seconds": 120.0}


def test_units_inside_a_flow_map_and_through_if_then_branches(loaded):
    document, _ = apply(loaded, "engine.workers.aggregated.timing={type: fixed, prefill_ms: 2s, decode_ms: 500us}",
                        f"{KV}.kvcr={{bandwidth_gbps: 1 TB/s, bogus: 3ms}}")
    workers = document["engine"]["workers"]["aggregated"]
    assert workers["timing"] == {"type": "fixed", "prefill_ms": 2000.0, "decode_ms": 0.5}
    # an unknown nested key keeps its text so that the validate pass can name the key
    assert workers["kv_cache"]["kvcr"] == {"bandwidth_gbps": 1000.0, "bogus": "3ms"}
    document, _ = apply(loaded, "engine.workers.aggregated.timing.decode_ms=40us")
    assert document["engine"]["workers"]["aggregated"]["timing"] == {"decode_ms": 0.04}


def test_paths_through_anyof_and_additional_properties(loaded):
    document, _ = apply(loaded, "engine.model={name: tiny, num_layers: 2}", "engine.model.num_layers=4",
                        "recommend.search.tensor=[1, 2, 4]")
    assert document["engine"]["model"] == {"name": "tiny", "num_layers": 4}
    assert document["recommend"] == {"search": {"tensor": [1, 2, 4]}}


def test_list_index_paths_replace_and_append(loaded):
    document, _ = apply(loaded, "traffic.source.paths[0]=c.jsonl", "traffic.source.paths[2]=d.jsonl")
    assert document["traffic"]["source"]["paths"] == ["c.jsonl", "b.jsonl", "d.jsonl"]


def test_later_override_wins_and_types_are_left_to_validate(loaded):
    document, spans = apply(loaded, f"{KV}.block_size=32", f"{KV}.block_size=64", "engine.backend=3")
    assert document["engine"]["workers"]["aggregated"]["kv_cache"]["block_size"] == 64
    assert document["engine"]["backend"] == 3
    assert spans.value(f"{KV_POINTER}/block_size") == Span(1, 47, "--set #2")


def test_input_is_not_mutated(loaded):
    before = copy.deepcopy(loaded.document)
    document, _ = apply(loaded, "traffic.source.paths[0]=x", f"{KV}.capacity.bytes=1GiB", "engine.backend=sglang")
    assert loaded.document == before
    assert document is not loaded.document
    assert document["traffic"]["source"]["paths"] is not loaded.document["traffic"]["source"]["paths"]


def test_spans_point_at_the_override(loaded):
    _, spans = apply(loaded, "engine.backend=vllm", f"{KV}.host_offload={{num_host_blocks: 8, scope: dp_rank_local}}")
    assert spans.value("/engine/backend") == Span(1, 16, "--set #1")
    assert spans.value(f"{KV_POINTER}/host_offload") == Span(1, 49, "--set #2")
    assert spans.value(f"{KV_POINTER}/host_offload/num_host_blocks") == Span(1, 67, "--set #2")
    assert spans.value(f"{KV_POINTER}/host_offload/scope") == Span(1, 77, "--set #2")
    # untouched values keep their file positions
    assert spans.value(f"{KV_POINTER}/block_size") == Span(7, 21)


def test_created_mappings_point_at_the_part_that_named_them(loaded):
    document, spans = apply(loaded, "traffic.load.concurrency=4")
    assert document["traffic"]["load"] == {"concurrency": 4}
    assert spans.value("/traffic/load") == Span(1, 9, "--set #1")
    assert spans.find("/traffic/load/type") == Span(1, 9, "--set #1")  # e.g. a missing required key


# ------------------------------------------------------------------ diagnostics

def test_unknown_path_part_suggests_a_key_at_its_column(loaded):
    [diagnostic] = diagnostics_of(loaded, f"{KV}.capacty.bytes=80GiB")
    assert diagnostic.code == "SET-PATH"
    assert diagnostic.pointer == f"{KV_POINTER}/capacty"
    assert diagnostic.message == f"unknown key `capacty` in `{KV}`"
    assert diagnostic.hint == "did you mean `capacity`?"
    assert diagnostic.span == Span(1, 36, "--set #1")


def test_unknown_top_level_key(loaded):
    [diagnostic] = diagnostics_of(loaded, "engin.backend=vllm")
    assert (diagnostic.code, diagnostic.hint, diagnostic.span) == ("SET-PATH", "did you mean `engine`?",
                                                                   Span(1, 1, "--set #1"))


@pytest.mark.parametrize("override, column, message", [
    ("engine[0]=1", 8, "`engine` is not a list, so it has no item `[0]`"),
    ("traffic.source.paths.x=1", 22, "`traffic.source.paths` is a list, not a mapping"),
    ("engine.backend.x=1", 16, "`engine.backend` takes a single value, so it has no key `x`"),
    ("traffic.source.paths[5]=x", 22, "`traffic.source.paths` has 2 item(s), so `[5]` is out of range"),
    ("engine.model.name=tiny", 14, '`engine.model` holds the string "Qwen/Qwen3-32B-FP8", not a mapping'),
])
def test_paths_that_do_not_fit_the_schema_or_document(loaded, override, column, message):
    [diagnostic] = diagnostics_of(loaded, override)
    assert (diagnostic.code, diagnostic.span.col, diagnostic.message) == ("SET-PATH", column, message)


@pytest.mark.parametrize("override, column, message, hint", [
    ("a..b=1", 3, "unexpected `.` in the override", "expected a key (letters, digits, `_`, `-`)"),
    ("a b=1", 3, "unexpected `b` in the override", "expected `.`, `=` or `[`"),
    ("engine.backend", 15, "an override needs PATH=VALUE but has no `=`", "write e.g. `engine.backend=sglang`"),
    ("engine.backend=", 16, "there is no value after `=`",
     'write a value; `null` (or `~`) for none, `""` for an empty string'),
    ("a=[1, 2", 8, "the override ends too early", "expected `,` or `]`"),
    ("a={k 1}", 6, "unexpected `1` in the override", "expected `:`"),
    ('a="open', 3, "this quoted string is not closed or has an unknown escape",
     'close the quote; inside double quotes write \\" \\\\ \\n \\t or \\uXXXX'),
    ('a="x" y', 7, "unexpected `y` in the override", "expected the end of the value"),
    ("a={k: 1, k: 2}", 10, "key `k` appears twice in one mapping", "remove one of them"),
])
def test_syntax_errors_have_a_column_and_no_lark_traceback(override, column, message, hint):
    with pytest.raises(CompileError) as caught:
        parse_override(override, 2)
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "SET-SYNTAX"
    assert diagnostic.span == Span(1, column, "--set #2")
    assert (diagnostic.message, diagnostic.hint) == (message, hint)


def test_unit_mismatch_and_fractional_integer(loaded):
    first, second, third = diagnostics_of(loaded, f"{KV}.capacity.bytes=32GB/s", f"{KV}.capacity.bytes=0.1KiB",
                                          "engine.nextn=2s")
    assert first.code == second.code == third.code == "SET-UNIT"
    assert first.message == f"`32GB/s` is a bandwidth but `{KV}.capacity.bytes` takes bytes"
    assert first.hint == "write a size such as `80 GiB`"
    assert first.span == Span(1, 51, "--set #1")
    assert second.message == f"`0.1KiB` is 102.4 B, but `{KV}.capacity.bytes` takes a whole number of B"
    assert third.message == "`engine.nextn` takes a plain number, not a quantity like `2s`"


def test_a_unit_error_inside_a_map_points_at_the_item(loaded):
    override = f"{KV}.host_offload={{num_host_blocks: 8, d2h_bandwidth_gbps: 3 ms}}"
    [diagnostic] = diagnostics_of(loaded, override)
    assert diagnostic.pointer == f"{KV_POINTER}/host_offload/d2h_bandwidth_gbps"
    assert diagnostic.message == f"`3ms` is a duration but `{KV}.host_offload.d2h_bandwidth_gbps` takes a bandwidth"
    assert diagnostic.span == Span(1, override.index("3 ms") + 1, "--set #1") == Span(1, 90, "--set #1")


def test_all_problems_are_reported_at_once(loaded):
    diagnostics = diagnostics_of(loaded, "engine.backend=vllm", "a..b=1", "engin.x=1", f"{KV}.capacity.bytes=3ms")
    assert [(d.code, d.span.source) for d in diagnostics] == [
        ("SET-SYNTAX", "--set #2"), ("SET-PATH", "--set #3"), ("SET-UNIT", "--set #4")]


def test_no_overrides_is_the_identity(loaded):
    document, spans = apply(loaded)
    assert document == loaded.document
    assert spans.value("/engine/model") == loaded.spans.value("/engine/model")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab0.5[]{},:=\"'\\ ~-GiBms/e")), max_size=24))
def test_any_text_gives_an_override_or_diagnostics_never_a_traceback(text):
    try:
        parse_override(text, 1)
    except CompileError as error:
        assert all(d.code == "SET-SYNTAX" and 1 <= d.span.col <= len(text) + 1 for d in error.diagnostics)
