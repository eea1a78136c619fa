"""Quantities with units in the config itself (issue 19, item 7): `bytes: 80GiB`, `d2h_bandwidth_gbps: 32 GB/s`,
`5us` are read as `--set` reads them and the plan holds plain numbers in the field's unit; a quantity that does
not fit its field is a schema error whose hint names the unit to write."""
from __future__ import annotations

import orjson

from kvreplay.compiler.pipeline import compile_bytes

from .support import EXAMPLES, compile_yaml

HOST = """engine:
  mode: aggregated
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  backend: vllm
  workers:
    aggregated:
      kv_cache:
        block_size: 16
        bytes_per_token: {bpt}
        capacity: {{type: fixed, bytes: {bytes}}}
        host_offload:
          num_host_blocks: 64
          d2h_bandwidth_gbps: {d2h}
          h2d_bandwidth_gbps: {h2d}
          latency_to_first_byte_ms: {latency}
      timing: {{type: fixed, prefill_ms: {prefill}, decode_ms: 1}}
traffic:
  source: {{type: synthetic}}
  load: {{type: concurrency, concurrency: 2}}
  stop: {{requests: 4}}
"""


def _plan(**values) -> dict:
    result = compile_yaml(HOST.format(**values))
    assert result.ok, [d.message for d in result.diagnostics]
    return orjson.loads(result.plan.canonical_json())


def test_quantities_in_yaml_become_the_plain_numbers_of_the_fields_unit():
    with_units = _plan(bytes="8GiB", d2h="32 GB/s", h2d="128Gb/s", latency="5us", prefill="1.5 ms", bpt="144 KiB")
    # 8 GiB = 8 * 2^30 bytes; 128 gigabit/s = 16 GB/s; 5 us = 0.005 ms; 144 KiB = 147456 bytes
    plain = _plan(bytes=8 * 2**30, d2h=32.0, h2d=16.0, latency=0.005, prefill=1.5, bpt=147456)
    assert with_units == plain
    kv = compile_yaml(HOST.format(bytes="8GiB", d2h="32 GB/s", h2d="128Gb/s", latency="5us", prefill="1.5 ms",
                                  bpt="144 KiB")).spec.plain()["engine"]["workers"]["aggregated"]["kv_cache"]
    assert kv["capacity"]["bytes"] == 8589934592 and isinstance(kv["capacity"]["bytes"], int)
    assert kv["host_offload"]["h2d_bandwidth_gbps"] == 16.0
    assert kv["host_offload"]["latency_to_first_byte_ms"] == 0.005


def test_a_whole_number_field_takes_a_fraction_of_a_larger_unit_that_is_whole():
    # 1.5 MiB = 1572864 bytes exactly; 0.5 B is no whole number of bytes
    assert _plan(bytes="1.5 MiB", d2h=1, h2d=1, latency=0, prefill=1, bpt=1024) == \
        _plan(bytes=1572864, d2h=1, h2d=1, latency=0, prefill=1, bpt=1024)
    result = compile_yaml(HOST.format(bytes="1.5 B", d2h=1, h2d=1, latency=0, prefill=1, bpt=1024))
    (diagnostic,) = result.diagnostics
    assert diagnostic.code == "SCHEMA-TYPE" and diagnostic.dotted.endswith("capacity.bytes")
    assert "takes a whole number of B" in diagnostic.hint and "`2`" in diagnostic.hint
    line = HOST.splitlines().index("        capacity: {{type: fixed, bytes: {bytes}}}") + 1
    assert (diagnostic.span.line, diagnostic.span.col) == (line, len("        capacity: {type: fixed, bytes: ") + 1)


def test_a_quantity_of_the_wrong_kind_or_no_quantity_names_the_unit_to_write():
    result = compile_yaml(HOST.format(bytes="8GiB", d2h="32 GiB", h2d="fast", latency="5 GB/s", prefill=1, bpt=1024))
    hints = {d.dotted.rsplit(".", 1)[1]: (d.code, d.hint) for d in result.diagnostics}
    assert hints == {
        "d2h_bandwidth_gbps": ("SCHEMA-TYPE", "`32 GiB` is a size but `engine.workers.aggregated.kv_cache.host_offload."
                               "d2h_bandwidth_gbps` takes a bandwidth: write a bandwidth such as `32 GB/s`"),
        "h2d_bandwidth_gbps": ("SCHEMA-TYPE", "write a number of GB/s or a quantity with its unit, e.g. `32 GB/s`"),
        "latency_to_first_byte_ms": ("SCHEMA-TYPE", "`5 GB/s` is a bandwidth but `engine.workers.aggregated.kv_cache."
                                     "host_offload.latency_to_first_byte_ms` takes a duration: write a duration "
                                     "such as `1.5 ms`")}


def test_a_unit_on_a_field_without_one_says_to_drop_it():
    result = compile_yaml(HOST.format(bytes="8GiB", d2h=1, h2d=1, latency=0, prefill=1, bpt=1024)
                          .replace("num_host_blocks: 64", "num_host_blocks: 64 GiB"))
    (diagnostic,) = result.diagnostics
    assert diagnostic.hint == ("`engine.workers.aggregated.kv_cache.host_offload.num_host_blocks` takes a plain "
                               "number, not a quantity: drop the unit `GiB`")


def test_a_quoted_plain_number_is_still_a_string():
    result = compile_yaml(HOST.format(bytes='"4096"', d2h=1, h2d=1, latency=0, prefill=1, bpt=1024))
    (diagnostic,) = result.diagnostics
    assert diagnostic.code == "SCHEMA-TYPE" and diagnostic.hint == "write 4096 without quotes"
    result = compile_yaml(HOST.format(bytes="8GiB", d2h='" 64.5"', h2d=1, latency=0, prefill=1, bpt=1024))
    (diagnostic,) = result.diagnostics
    assert diagnostic.dotted.endswith("d2h_bandwidth_gbps") and diagnostic.hint == "write 64.5 without quotes"


def test_an_opal_config_takes_units_too():
    """opal's memory_gb is in GiB (2^30 bytes): 38.654705664 GB is 36 GiB, the README's 8,511-block GPU."""
    text = (EXAMPLES / "opal" / "defaults.json").read_bytes()
    document = orjson.loads(text)
    document["worker"]["hw"]["memory_gb"] = "38.654705664 GB"
    with_units = compile_bytes(orjson.dumps(document), str(EXAMPLES / "opal" / "defaults.json"))
    document["worker"]["hw"]["memory_gb"] = 36.0  # (a quantity converts to a float, as --set gives)
    plain = compile_bytes(orjson.dumps(document), str(EXAMPLES / "opal" / "defaults.json"))
    assert with_units.ok and plain.ok
    assert with_units.plan.canonical_json() == plain.plan.canonical_json()
    # opal's formula: floor((36 * 2^30 - 8170860544 params x 2 B) / (16 tokens x 163840 B))
    blocks = (36 * 2**30 - 8170860544 * 2) // (16 * 163840)
    assert orjson.loads(with_units.plan.canonical_json())["opal"]["derived"]["total_gpu_blocks"] == blocks == 8511


def test_the_editors_schema_takes_a_quantity_of_the_fields_dimension_only(capsys):
    """`kvreplay schema` (for editors) lets `bytes: 80GiB` and `d2h_bandwidth_gbps: 32 GB/s` pass, as the compiler
    does, but not a bandwidth for bytes or a unit on a count; the compiler's own check is unchanged."""
    import json

    from jsonschema import Draft202012Validator

    from kvreplay.cli import main

    assert main(["schema"]) == 0
    editor = Draft202012Validator(json.loads(capsys.readouterr().out))

    def errors(**values):
        document = orjson.loads(orjson.dumps({"engine": {"model": "Qwen/Qwen3-8B", "hardware": "h100_sxm",
                                                         "workers": {"aggregated": {"kv_cache": {
                                                             "capacity": {"type": "fixed", "bytes": values["bytes"]},
                                                             "host_offload": {"num_host_blocks": values["blocks"],
                                                                              "d2h_bandwidth_gbps": values["d2h"]}}}}}}))
        return sorted(e.json_path.rsplit(".", 1)[1] for e in editor.iter_errors(document))

    assert errors(bytes="80GiB", blocks=64, d2h="32 GB/s") == []
    assert errors(bytes=85899345920, blocks=64, d2h=32.0) == []
    assert errors(bytes="80 GB/s", blocks="64 GiB", d2h="32 GiB") == ["bytes", "d2h_bandwidth_gbps", "num_host_blocks"]
