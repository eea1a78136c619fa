"""The command line: exit codes, text and JSON reports, compile/explain/schema/rules."""
from __future__ import annotations

import json

import pytest

from kvreplay.cli import main

from .support import EXAMPLES

HOST = str(EXAMPLES / "host-offload-prediction.yaml")
BAD = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  backend: sglang
  workers:
    aggregated:
      kv_cache:
        host_offload: {num_host_blocks: 8}
traffic: {source: {type: synthetic}, stop: {requests: 1}, load: {type: concurrency}}
"""


@pytest.fixture
def bad(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_ok(capsys):
    code, out, _ = run(capsys, "validate", HOST)
    assert code == 0 and out == "1 file valid\n"


def test_validate_text_report(capsys, bad):
    code, out, err = run(capsys, "validate", bad, HOST)
    assert code == 1 and out == ""  # (diagnostics on stderr, as every command writes them)
    lines = err.splitlines()
    assert lines[0] == (f"{bad}:8:9: error[G2-BACKEND] engine.workers.aggregated.kv_cache.host_offload: host offload "
                        "(G2) follows vLLM's CPU offload and is rejected with SGLang and TensorRT-LLM")
    assert lines[1] == "            host_offload: {num_host_blocks: 8}"
    assert lines[2] == "            ^"  # (at the key the rule is about, not inside its mapping)
    assert lines[3:6] == [f"  note: `backend: sglang` is chosen here: {bad}:4:12",  # (the other half of the conflict)
                          "      backend: sglang", "               ^"]
    assert lines[6] == "  hint: use `backend: vllm` or remove `host_offload`"
    assert lines[7] == "  spec: kv-cache-tiers.md \N{SECTION SIGN} Host offload (G2) / Supported"
    assert lines[-1] == "1 error in 1 of 2 files"


def test_validate_json_report(capsys, bad):
    code, out, _ = run(capsys, "validate", "--format", "json", bad)
    report = json.loads(out)
    assert code == 1
    (diagnostic,) = report["files"][0]["diagnostics"]
    assert (diagnostic["code"], diagnostic["line"], diagnostic["column"]) == ("G2-BACKEND", 8, 9)
    assert report["summary"] == {"files": 1, "invalid_files": 1, "errors": 1}


def test_missing_file_is_a_usage_error(capsys, tmp_path):
    code, out, err = run(capsys, "validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and "LOAD-FILE" in err and out == ""


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["validate"])
    assert info.value.code == 2


def test_set_overrides_fix_a_config(capsys, bad):
    code, _, _ = run(capsys, "validate", bad, "--set", "engine.backend=vllm")
    assert code == 0


def test_set_errors_point_into_the_argument(capsys):
    code, _, err = run(capsys, "validate", HOST, "--set", "engine.workers.aggregated.kv_cach.block_size=8")
    assert code == 1
    assert "--set #1:1:27: error[SET-PATH]" in err and "did you mean `kv_cache`?" in err


def test_compile_writes_a_canonical_plan(capsys, tmp_path):
    target = tmp_path / "plan.json"
    code, out, _ = run(capsys, "compile", HOST, "-o", str(target),
                       "--set", "engine.workers.aggregated.kv_cache.capacity.blocks=1000")
    plan = json.loads(target.read_text())
    assert code == 0 and out == ""
    assert plan["engine"]["workers"]["aggregated"]["kv_cache"]["capacity"]["blocks"] == 1000
    assert plan["geometry"]["aggregated"]["g2_block_bytes"] == 16 * 131072


def test_compile_failure_reports_on_stderr(capsys, bad):
    code, out, err = run(capsys, "compile", bad)
    assert code == 1 and out == "" and "G2-BACKEND" in err


def test_explain_shows_provenance(capsys):
    code, out, _ = run(capsys, "explain", HOST)
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert code == 0
    assert lines["engine.workers.aggregated.kv_cache.block_size"].split()[1:] == ["16", "user"]
    assert "default(spec: one pool per DP rank)" in lines["engine.workers.aggregated.kv_cache.host_offload.scope"]
    assert "inferred(64 layers x 8 KV heads/rank" in lines["engine.workers.aggregated.kv_cache.bytes_per_token"]


def test_explain_json(capsys):
    code, out, _ = run(capsys, "explain", HOST, "--format", "json")
    rows = {row["path"]: row for row in json.loads(out)}
    assert rows["geometry.aggregated.g1_blocks"]["value"] == 2499


def test_schema_is_a_2020_12_document(capsys):
    code, out, _ = run(capsys, "schema")
    schema = json.loads(out)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "host_offload" in schema["$defs"]


def test_rules_table(capsys):
    code, out, _ = run(capsys, "rules", "--format", "json")
    rules = json.loads(out)
    ids = [r["id"] for r in rules]
    assert len(ids) == len(set(ids)) > 60
    assert all(r["section"] and r["message"] and r["hint"] for r in rules)
    code, out, _ = run(capsys, "rules")
    assert "G2-BACKEND" in out
