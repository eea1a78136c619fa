"""opal stage files: Mooncake `trace` stages and pretokenized `otel` sessions, read by the traces pass.

Bad rows are located in the stage file (`file:line`) and name the config value that names the file;
paths are relative to the config's folder, else the working directory; a plan written with
`kvreplay compile -o` finishes again (`finish_plan`) to the same records.
"""
from __future__ import annotations

import json
from datetime import datetime

import orjson

from kvreplay.cli import main
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.pipeline import compile_file

from .support import EXAMPLES
from .test_opal_frontend import opal_config

OPAL = EXAMPLES / "opal"
HELLO = [json.loads(line) for line in (OPAL / "traces" / "hello.jsonl").read_text().splitlines()]
SESSIONS = [json.loads(line) for line in
            (OPAL / "traces" / "synthetic_otel_traces-pretokenized.jsonl").read_text().splitlines()]


def trace_stage(**params):
    def change(doc):
        doc["workload"]["stages"][1]["workload_params"].update(params)
    return change


def write_rows(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_trace_stage_rows_in_ns():
    _, stage = compile_file(OPAL / "defaults.json").plan.records.opal.stages
    assert stage.chunk_size == 1 and len(stage.rows) == 10
    assert [row.timestamp_ns for row in stage.rows[:4]] == [0, 1_000_000_000, 3_500_000_000, 5_999_000_000]
    assert [row.input_length for row in stage.rows] == [row["input_length"] for row in HELLO]
    assert stage.rows[0].hash_ids == tuple(HELLO[0]["hash_ids"]) and stage.rows[0].output_length == 265


def test_total_requests_cuts_the_trace(tmp_path):
    _, stage = compile_file(opal_config(tmp_path, trace_stage(total_requests=3))).plan.records.opal.stages
    assert len(stage.rows) == 3
    _, stage = compile_file(opal_config(tmp_path, trace_stage(total_requests=-1))).plan.records.opal.stages
    assert len(stage.rows) == 10


def test_hash_ids_stand_for_chunk_size_tokens(tmp_path):
    rows = [{"timestamp": 0, "input_length": 1000, "output_length": 4, "hash_ids": [1, 2]},  # 512 + 488
            {"timestamp": 5, "input_length": 1025, "output_length": 4, "hash_ids": [1, 2]}]  # needs 3
    trace = write_rows(tmp_path / "t.jsonl", rows)
    config = opal_config(tmp_path, trace_stage(trace_file=str(trace), chunk_size=512, multiplier_to_sec=1))
    (d,) = compile_file(config).diagnostics
    assert (d.code, d.source, d.span.line, d.pointer) == ("TRACE-ROW", str(trace), 2, "/hash_ids")
    assert "2 hash_ids for 1025 tokens; blocks of 512 tokens need 3" in d.message and "chunk_size" in d.hint
    assert d.named_by.dotted == "workload.stages[1].workload_params.trace_file" and d.named_by.span.line > 1


def test_the_default_chunk_size_is_512(tmp_path):
    trace = write_rows(tmp_path / "t.jsonl", [{"timestamp": 2, "input_length": 1024, "output_length": 1,
                                               "hash_ids": [7, 8]}])

    def change(doc):
        trace_stage(trace_file=str(trace), multiplier_to_sec=0.5)(doc)
        del doc["workload"]["stages"][1]["workload_params"]["chunk_size"]
    _, stage = compile_file(opal_config(tmp_path, change)).plan.records.opal.stages
    assert stage.chunk_size == 512 and stage.rows[0].timestamp_ns == 1_000_000_000


def test_bad_trace_files_are_located_and_never_a_traceback(tmp_path, capsys):
    (tmp_path / "bad.jsonl").write_text('{"timestamp": 0}\nnot json\n')
    config = opal_config(tmp_path, trace_stage(trace_file="bad.jsonl"))
    assert main(["validate", str(config)]) == 1
    out = capsys.readouterr().err
    assert f"{tmp_path / 'bad.jsonl'}:1:1: error[TRACE-ROW]" in out and f"{tmp_path / 'bad.jsonl'}:2:1:" in out
    assert "note: named by" in out and "workload.stages[1].workload_params.trace_file" in out
    missing = opal_config(tmp_path, trace_stage(trace_file="nowhere.jsonl"), name="missing.json")
    (d,) = compile_file(missing).diagnostics
    assert d.code == "TRACE-FILE" and d.source == str(tmp_path / "nowhere.jsonl")


def test_stage_paths_fall_back_to_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    config = opal_config(tmp_path / "configs", trace_stage(trace_file="traces/hello.jsonl"))
    assert {d.code for d in compile_file(config).diagnostics} == {"TRACE-FILE"}
    monkeypatch.chdir(OPAL)
    assert len(compile_file(config).plan.records.opal.stages[1].rows) == 10


def test_otel_sessions_relative_to_the_earliest_start():
    _, stage = compile_file(OPAL / "defaults_apc.json").plan.records.opal.stages
    assert [s.id for s in stage.sessions] == [s["trace_id"] for s in SESSIONS]
    assert (stage.max_concurrent_sessions, stage.inter_turn_multiplier, stage.total_requests) == (24, 1, None)
    first, second = stage.sessions[0], stage.sessions[1]
    assert [(t.start_ns, t.end_ns) for t in first.turns] == [(0, 1_000_000_000), (11_784_245_000, 12_784_245_000)]
    assert second.turns[0].start_ns == 86_400 * 10 ** 9  # a day after the first session
    assert first.turns[1].prompt_ids == tuple(SESSIONS[0]["turns"][1]["hash_ids"])
    assert len(first.turns[0].output_ids) == SESSIONS[0]["turns"][0]["output_length"] == 23
    assert sum(len(s.turns) for s in stage.sessions) == sum(len(s["turns"]) for s in SESSIONS)


def test_otel_times_scale_with_multiplier_to_sec(tmp_path):
    def change(doc):
        doc["workload"]["stages"][1]["workload_params"].update(multiplier_to_sec=0.001, max_concurrent_sessions=-1)
    _, stage = compile_file(opal_config(tmp_path, change, base="defaults_apc.json")).plan.records.opal.stages
    assert stage.sessions[0].turns[1].start_ns == 11_784_245 and stage.max_concurrent_sessions is None


def test_otel_lengths_must_match_the_ids(tmp_path):
    sessions = json.loads(json.dumps(SESSIONS[:2]))
    sessions[1]["turns"][2]["input_length"] += 1
    sessions[0]["turns"][0]["end_time"] = "yesterday"
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))

    def change(doc):
        doc["workload"]["stages"][1]["workload_params"]["trace_file"] = str(path)
    result = compile_file(opal_config(tmp_path, change, base="defaults_apc.json"))
    assert [(d.code, d.span.line, d.pointer) for d in result.diagnostics] == [
        ("TRACE-ROW", 1, "/turns/0/start_time"), ("TRACE-ROW", 2, "/turns/2/hash_ids")]
    assert "1408 hash_ids for a length of 1409" in result.diagnostics[1].message


def test_the_plan_round_trips_through_its_json(tmp_path, capsys):
    for name in ("defaults.json", "defaults_apc.json"):
        out = tmp_path / f"{name}.plan.json"
        assert main(["compile", str(OPAL / name), "-o", str(out)]) == 0
        records = compile_file(OPAL / name).plan.records
        assert finish_plan(orjson.loads(out.read_bytes()), OPAL) == records
        assert records.opal is not None and records.roles[0].g1_blocks == 26_534


def test_iso_times_of_the_file_parse():
    assert datetime.fromisoformat(SESSIONS[0]["turns"][0]["start_time"]).year == 2026
