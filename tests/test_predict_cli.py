"""`kvreplay predict` as a command: exit codes, messages, output files and stdout formats.

Exit codes (REFERENCE.md, CLI): 0 ok, 1 run failure (including "not replayable yet": agentx traffic), 2
config/usage error.
"""
from __future__ import annotations

import json
import uuid

import orjson
import pytest

from kvreplay.cli import main

from .support import EXAMPLES

ONE_REQUEST = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  workers:
    aggregated:
      timing: {type: fixed, prefill_ms: 10.0, decode_ms: 2.0}
      kv_cache:
        block_size: 16
        capacity: {type: fixed, blocks: 1000}
traffic:
  source: {type: synthetic, input_tokens: 128, output_tokens: 5}
  load: {type: concurrency, concurrency: 2}
  stop: {requests: 3}
"""

REQUEST_KEYS = {
    "uuid", "session_id", "turn_index", "arrival_time_ms", "first_admit_ms", "first_token_ms", "last_token_ms",
    "terminal_time_ms", "ttft_ms", "ttst_ms", "itl_ms", "e2e_latency_ms", "input_length",
    "requested_output_length", "output_length", "reused_input_tokens", "first_admission_reused_input_tokens",
    "first_admission_g1_reused_input_tokens", "first_admission_host_reused_input_tokens", "admission_history",
    "admission_count", "readmission_count", "terminal_status",
}
ADMISSION_KEYS = {"admission_ordinal", "pool", "at_ms", "reused_input_tokens", "g1_reused_input_tokens",
                  "host_reused_input_tokens", "is_readmission"}
SUMMARY_KEYS = {
    "num_requests", "completed_requests", "duration_ms", "total_input_tokens", "total_output_tokens",
    "request_throughput_rps", "output_throughput_tok_s", "prefix_cache_reused_ratio",
    "first_admission_prefix_cache_reused_ratio", "committed_prefill_tokens", "kv_eviction_policy",
} | {f"{stat}_{metric}_ms" for metric in ("ttft", "ttst", "tpot", "itl", "e2e_latency")
     for stat in ("mean", "min", "max", "median", "p75", "p90", "p95", "p99", "std")} \
  | {f"num_{metric}_samples" for metric in ("ttft", "ttst", "tpot", "itl", "e2e_latency")}


def run(capsys, *argv):
    code = main(["predict", "--no-progress", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(ONE_REQUEST)
    return path


# ---------------------------------------------------------------------------------------------- not replayable yet

def test_agentx_traffic_exits_1_with_a_clear_message(tmp_path, capsys):
    path = tmp_path / "agentx.yaml"
    path.write_text(ONE_REQUEST.split("traffic:")[0] + "traffic:\n"
                    "  source: {type: agentx, profile: snapshot, paths: [agent.jsonl]}\n"
                    "  load: {type: concurrency, concurrency: 2}\n  stop: {sessions: 2}\n")
    code, out, err = run(capsys, "-c", path, "--output-dir", tmp_path / "out")
    assert code == 1 and out == ""
    assert "agentx" in err and "not available yet" in err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------- outputs

def test_refuses_to_overwrite_without_the_flag(config, tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert run(capsys, "-c", config, "--output-dir", out_dir)[0] == 0
    before = (out_dir / "prediction.json").read_bytes()
    code, out, err = run(capsys, "-c", config, "--output-dir", out_dir, "--set", "traffic.stop.requests=1")
    assert code == 2 and out == ""
    assert "prediction.json exists" in err and "--overwrite" in err
    assert (out_dir / "prediction.json").read_bytes() == before
    code, _, err = run(capsys, "-c", config, "--output-dir", out_dir, "--set", "traffic.stop.requests=1",
                       "--overwrite")
    assert code == 0, err
    assert json.loads((out_dir / "prediction.json").read_text())["num_requests"] == 1


def test_refuses_to_overwrite_requests_jsonl_without_the_flag(config, tmp_path, capsys):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "requests.jsonl").write_text("keep\n")
    code, _, err = run(capsys, "-c", config, "--output-dir", out_dir, "--capture-per-request")
    assert code == 2 and "requests.jsonl exists" in err
    assert (out_dir / "requests.jsonl").read_text() == "keep\n"


def test_format_json_prints_prediction_json(config, tmp_path, capsys):
    code, out, err = run(capsys, "-c", config, "--output-dir", tmp_path / "out", "--format", "json")
    assert code == 0, err
    assert out.encode() == (tmp_path / "out" / "prediction.json").read_bytes()
    assert json.loads(out)["completed_requests"] == 3


def test_table_format_prints_a_summary(config, tmp_path, capsys):
    code, out, err = run(capsys, "-c", config, "--output-dir", tmp_path / "out")
    assert code == 0, err
    rows = dict(line.split("  ", 1) for line in out.splitlines())
    rows = {label.strip(): value.strip() for label, value in rows.items()}
    # two requests prefill together (10 ms) and decode (4 x 2 ms); the third arrives when they end (closed loop)
    # and runs 18-36 ms
    assert rows["requests (completed / total)"] == "3 / 3"
    assert rows["duration"] == "0.036 s"
    assert rows["throughput"] == "83.33 req/s"
    assert rows["TTFT mean / p99"] == "10.00 ms / 10.00 ms"
    assert rows["E2E mean / p99"] == "18.00 ms / 18.00 ms"
    assert rows["TPOT mean"] == "2.00 ms"
    assert rows["preemptions"] == "0" and rows["rejected"] == "0"
    assert "prefix reuse (all / first admission)" in rows
    assert not any(label.startswith(("G2", "G3", "KVCR")) for label in rows)  # tier rows only with their tier
    assert not (tmp_path / "out" / "requests.jsonl").exists()  # only with --capture-per-request
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_capture_per_request_writes_one_record_per_request(config, tmp_path, capsys):
    code, _, err = run(capsys, "-c", config, "--output-dir", tmp_path / "out", "--capture-per-request")
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "prediction.json").read_text())
    assert SUMMARY_KEYS <= summary.keys()
    lines = (tmp_path / "out" / "requests.jsonl").read_bytes().splitlines()
    records = [orjson.loads(line) for line in lines]
    assert len(records) == summary["num_requests"] == 3
    assert [r["index"] for r in records] == [0, 1, 2]
    for record in records:
        assert REQUEST_KEYS <= record.keys(), REQUEST_KEYS - record.keys()
        assert record["admission_history"] and all(a.keys() >= ADMISSION_KEYS for a in record["admission_history"])
        assert uuid.UUID(record["uuid"]).version == 4
        assert record["terminal_status"] == "completed"
    assert len({r["uuid"] for r in records}) == 3
    # deterministic ids: the same on another run
    run(capsys, "-c", config, "--output-dir", tmp_path / "again", "--capture-per-request")
    assert (tmp_path / "again" / "requests.jsonl").read_bytes() == b"\n".join(lines) + b"\n"


def test_no_completed_request_exits_1(config, tmp_path, capsys):
    """Every prompt needs 8 blocks of a 4-block G1: all rejected (each when the idle scheduler reaches it), the run
    ends, exit 1."""
    code, out, err = run(capsys, "-c", config, "--output-dir", tmp_path / "out", "--format", "json",
                         "--set", "engine.workers.aggregated.kv_cache.capacity.blocks=4")
    assert code == 1
    assert err == ("kvreplay: no request completed: all 3 requests were rejected, e.g. 0: the prompt "
                   "needs 8 G1 blocks but worker0.dp0 holds 4\n")
    summary = json.loads(out)
    assert (summary["num_requests"], summary["rejected_requests"], summary["completed_requests"]) == (3, 3, 0)


# ---------------------------------------------------------------------------------------------- errors

def test_config_error_exits_2_with_file_line_col(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(ONE_REQUEST.replace("blocks: 1000", 'blocks: "1000"'))
    code, out, err = run(capsys, "-c", path, "--output-dir", tmp_path / "out")
    assert code == 2 and out == ""
    assert err.startswith(f"{path}:9:41: error[SCHEMA-TYPE] engine.workers.aggregated.kv_cache.capacity.blocks: ")
    assert "hint:" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_all_config_errors_are_reported_at_once(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(ONE_REQUEST.replace("blocks: 1000", 'blocks: "1000"').replace("requests: 3", "requests: 0"))
    code, _, err = run(capsys, "-c", path, "--output-dir", tmp_path / "out")
    assert code == 2
    assert f"{path}:9:41: error[SCHEMA-TYPE]" in err and f"{path}:13:20: error[SCHEMA-RANGE]" in err


def test_bad_override_exits_2(config, tmp_path, capsys):
    code, _, err = run(capsys, "-c", config, "--output-dir", tmp_path / "out",
                       "--set", "engine.workers.aggregated.kv_cache.nope=1")
    assert code == 2
    assert "error[SET-PATH] engine.workers.aggregated.kv_cache.nope" in err


def test_missing_config_exits_2(tmp_path, capsys):
    code, _, err = run(capsys, "-c", tmp_path / "missing.yaml", "--output-dir", tmp_path / "out")
    assert code == 2 and "LOAD-FILE" in err


TRACE_CONFIG = ONE_REQUEST.split("traffic:")[0] + """traffic:
  source: {type: trace, paths: [trace.jsonl], format: mooncake, block_size: 512}
  load: {type: trace_timestamps}
"""


def test_bad_trace_row_exits_2_naming_the_trace_file_and_line(tmp_path, capsys):
    rows = [{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]},
            {"timestamp": 1, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2]},  # needs 3 ids
            {"timestamp": 2, "input_length": 10, "output_length": 4, "hash_ids": [5]}]
    (tmp_path / "trace.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    path = tmp_path / "trace.yaml"
    path.write_text(TRACE_CONFIG)
    code, out, err = run(capsys, "-c", path, "--output-dir", tmp_path / "out")
    assert code == 2 and out == ""
    trace = tmp_path / "trace.jsonl"
    assert f"{trace}:2:1: error[TRACE-ROW]" in err
    assert "2 hash_ids for 1100 tokens" in err and "need 3" in err
    assert f"{trace}:1:" not in err and f"{trace}:3:" not in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_unreadable_trace_exits_2(tmp_path, capsys):
    path = tmp_path / "trace.yaml"
    path.write_text(TRACE_CONFIG)
    code, _, err = run(capsys, "-c", path, "--output-dir", tmp_path / "out")
    assert code == 2
    assert f"{tmp_path / 'trace.jsonl'}:1:1: error[TRACE-FILE]" in err


def test_example_trace_paths_are_relative_to_the_config_not_the_cwd(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "-c", EXAMPLES / "mooncake-trace.yaml", "--output-dir", "out", "--format", "json",
                         "--set", "traffic.stop.max_virtual_time_seconds=5")
    assert code == 0, err
    assert json.loads(out)["num_requests"] > 0
    assert (tmp_path / "out" / "prediction.json").exists()


def test_table_shows_a_row_per_tier_the_run_has(tmp_path, capsys):
    """The G3 example (four workers, shared store) prints its G2 and G3 block counts, as prediction.json has them."""
    code, out, err = run(capsys, "-c", EXAMPLES / "g3-storage.yaml", "--output-dir", tmp_path / "out",
                         "--set", "traffic.stop.sessions=8")
    assert code == 0, err
    rows = {label.strip(): value.strip() for label, value in (line.split("  ", 1) for line in out.splitlines())}
    summary = json.loads((tmp_path / "out" / "prediction.json").read_bytes())
    g2 = summary["g2_domains"]
    assert rows["G2 blocks (stored / restored)"] == \
        f"{sum(d['stores'] for d in g2):,} / {sum(d['restores'] for d in g2):,}"
    g3 = summary["g3_offload"]
    assert rows["G3 blocks (written / read)"] == f"{g3['write_blocks']:,} / {g3['read_blocks']:,}" != "0 / 0"
    assert "KVCR pulls (blocks, loaded)" not in rows


def test_a_cutoff_before_any_completion_says_so(tmp_path, capsys):
    code, _, err = run(capsys, "-c", EXAMPLES / "mooncake-trace.yaml", "--output-dir", tmp_path / "out",
                       "--set", "traffic.stop.max_virtual_time_seconds=0.001")
    assert code == 1 and err == ("kvreplay: no request completed: the run stopped at 0.001 s of virtual time before "
                                 "any request finished (traffic.stop.max_virtual_time_seconds)\n")
