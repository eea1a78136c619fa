"""`mooncake-delta` and `agentic_mooncake` traces (examples/agentic/): replayed as AISimulate documents them,
and every bad row, session or dependency reported at its file:line:col.

agentic-mooncake-g2 is the AgentX fixture agentx-g2-local written as request nodes: the parent (9 tokens,
blocks 1-3) at 0; the child waits for it + 98 ms; the parent's resume for the child + 90 + 8 (tool wait) ms;
the side request is a root at 300 ms.  With fixed timing 2 ms prefill and 1-token outputs each ends 2 ms after
it is admitted, so they arrive at 0, 100, 200 and the resume restores its 8-token prefix (two 4-token blocks,
2 MB at 250 kB a token) from G2 over the 1 GB/s link in 2 ms.  A root that nothing joins to another is a play
of its own, whatever its session (AISimulate 0.13: `legacy-play:<earliest root>`), so with one lane the side
request starts when the first play ends (204 ms), where the AgentX play's side request, inside its play, keeps
its 300 ms.
"""
from __future__ import annotations

import gzip

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file

from .support import EXAMPLES, read_outputs

AGENTIC = EXAMPLES / "agentic"


def run(config, tmp_path, *sets):
    argv = ["predict", "-c", str(config), "--output-dir", str(tmp_path / "o"), "--capture-per-request",
            "--no-progress", "--overwrite"]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0
    summary, records = read_outputs(tmp_path / "o")
    return summary, sorted(records, key=lambda r: (r["arrival_time_ms"], r["id"]))


def test_agentic_mooncake_replays_the_fixture_as_its_weka_play(tmp_path):
    summary, records = run(AGENTIC / "agentic-mooncake-g2.yaml", tmp_path)
    assert [r["id"] for r in records] == ["parent-0", "child-0", "parent-1", "side-0"]
    assert [r["arrival_time_ms"] for r in records] == [0.0, 2.0 + 98, 102.0 + 90 + 8, 200.0 + 2 + 2]
    resume = records[2]
    assert resume["first_admission_host_reused_input_tokens"] == 8
    assert resume["first_admit_ms"] == 200.0 + 8 * 250_000 / 1e9 * 1e3  # the restore: 2 MB at 1 GB/s
    assert summary["completed_requests"] == 4
    assert summary["first_admission_prefix_cache_reused_ratio"] == pytest.approx(8 / 36)
    assert summary["agentic_input_format"] == "agentic_mooncake"
    assert summary["agentic_qualification"] == "functional_only"
    assert [o["play_id"] for o in summary["agentic_play_outcomes"]] == ["legacy-play:parent-0", "legacy-play:side-0"]
    weka, weka_records = run(AGENTIC / "agentx-g2-local.yaml", tmp_path)
    assert [r["arrival_time_ms"] for r in weka_records] == [0.0, 100.0, 200.0, 300.0]
    assert weka["first_admission_prefix_cache_reused_ratio"] == summary["first_admission_prefix_cache_reused_ratio"]
    _, laned = run(AGENTIC / "agentic-mooncake-g2.yaml", tmp_path, "traffic.load.agentic_lanes=4")
    assert [r["id"] for r in laned if r["arrival_time_ms"] == 0.0] == ["parent-0", "side-0"]  # lanes start at once
    _, unlaned = run(AGENTIC / "agentic-mooncake-g2.yaml", tmp_path, "traffic.load={type: trace_timestamps}")
    assert unlaned[3]["id"] == "side-0" and unlaned[3]["arrival_time_ms"] == 300.0  # no lanes: its own timestamp


COMPONENTS = """\
{"request_id":"zeta-0","session_id":"s1","timestamp":0,"input_length":8,"output_length":1,"hash_ids":[1,2]}
{"request_id":"zeta-1","session_id":"s1","wait_for":["zeta-0"],"delay":10,"input_length":12,"output_length":1,"hash_ids":[1,2,3]}
{"request_id":"alpha-0","session_id":"s1","timestamp":50,"input_length":8,"output_length":1,"hash_ids":[7,8]}
{"request_id":"mid-0","session_id":"s2","timestamp":5,"input_length":8,"output_length":1,"hash_ids":[9,10]}
{"request_id":"beta-0","session_id":"s3","timestamp":20,"input_length":8,"output_length":1,"hash_ids":[11,12]}
{"request_id":"beta-1","session_id":"s3","timestamp":3,"input_length":8,"output_length":1,"hash_ids":[13,14]}
{"request_id":"beta-2","session_id":"s3","wait_for":["beta-0","beta-1"],"delay":1,"input_length":8,"output_length":1,"hash_ids":[13,14]}
"""


def test_agentic_mooncake_plays_are_wait_for_components_taken_in_name_order(tmp_path):
    """Plays are the nodes joined by `wait_for`, not sessions: alpha-0 shares zeta's session `s1` but nothing joins
    them; beta-0 and beta-1 (two roots) are one play through beta-2.  A play is named after its earliest root
    (beta-1, at 3 ms) and one lane takes them in name order (alpha, beta, mid, zeta), each root at its offset from
    the play's earliest root: AISimulate 0.13's times on this trace to the millisecond (reference-facts §35)."""
    (tmp_path / "components.jsonl").write_text(COMPONENTS)
    config = tmp_path / "c.yaml"
    config.write_text((AGENTIC / "agentic-mooncake-g2.yaml").read_text()
                      .replace("agentic-mooncake-g2.jsonl", "components.jsonl").replace("blocks: 3}", "blocks: 64}"))
    summary, records = run(config, tmp_path)
    # alpha-0 at 0 (ends 2); beta-1 at 2 and beta-0 17 ms later (20 - 3), beta-2 1 ms after beta-0 ends (21);
    # mid-0 when beta-2 ends (24); zeta-0 at 26 and zeta-1 10 ms after it ends (28)
    assert [(r["id"], r["arrival_time_ms"]) for r in records] == [
        ("alpha-0", 0.0), ("beta-1", 2.0), ("beta-0", 19.0), ("beta-2", 22.0), ("mid-0", 24.0), ("zeta-0", 26.0),
        ("zeta-1", 38.0)]
    assert [(o["play_id"], o["requests"], o["end_ms"]) for o in summary["agentic_play_outcomes"]] == [
        ("legacy-play:alpha-0", 1, 2.0), ("legacy-play:beta-1", 3, 24.0), ("legacy-play:mid-0", 1, 26.0),
        ("legacy-play:zeta-0", 2, 40.0)]
    assert records[0]["session_id"] == "legacy-play:alpha-0:s1" and records[6]["session_id"] == "legacy-play:zeta-0:s1"
    # reuse: beta-2 finds beta-1's first block (4 of 8), zeta-1 zeta-0's two (8 of 12): 12 of 60 tokens
    assert summary["first_admission_prefix_cache_reused_ratio"] == pytest.approx(12 / 60)


def test_agentic_mooncake_without_the_host_tier_loses_the_parent_prefix(tmp_path):
    _, records = run(AGENTIC / "agentic-mooncake-g2.yaml", tmp_path,
                     "engine.workers.aggregated.kv_cache.host_offload.num_host_blocks=2")
    assert records[2]["first_admission_reused_input_tokens"] == 0  # the child's stores evicted the parent's


def test_mooncake_delta_builds_each_prompt_from_the_last(tmp_path):
    # chat-a: 8 tokens + 4 out; then 8 + 4 + 4 = 16 (+ 4 out); then 16 + 4 + 4 = 24.  Each turn starts 10 ms after
    # the previous completes: turn 0 ends at 2 (prefill) + 3 (decodes) = 5, turn 1 at 15 + 5 = 20.
    summary, records = run(AGENTIC / "mooncake-delta.yaml", tmp_path)
    by_id = {r["id"]: r for r in records}
    turns = [by_id[f"chat-a:turn{i}"] for i in range(3)]
    assert [t["input_length"] for t in turns] == [8, 16, 24]
    assert [t["arrival_time_ms"] for t in turns] == [0.0, 5.0 + 10, 20.0 + 10]
    # a turn reuses the previous prompt's whole 4-token blocks: 8 of turn 0's, 16 of turn 1's
    assert [t["first_admission_reused_input_tokens"] for t in turns] == [0, 8, 16]
    assert by_id["chat-b:turn0"]["first_admission_reused_input_tokens"] == 8  # chat-a's blocks 1, 2
    assert summary["first_admission_prefix_cache_reused_ratio"] == pytest.approx((8 + 16 + 8) / (8 + 16 + 24 + 12))
    assert "agentic_qualification" not in summary  # session traffic, not agentic


def test_mooncake_delta_with_concurrency_runs_one_session_at_a_time(tmp_path):
    _, records = run(AGENTIC / "mooncake-delta.yaml", tmp_path, "traffic.load={type: concurrency, concurrency: 1}")
    by_id = {r["id"]: r for r in records}
    assert by_id["chat-b:turn0"]["arrival_time_ms"] == by_id["chat-a:turn2"]["last_token_ms"] == 30.0 + 2


def test_a_gzipped_delta_trace_reads_the_same(tmp_path):
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress((AGENTIC / "mooncake-delta.jsonl").read_bytes(), mtime=0))
    (tmp_path / "c.yaml").write_text((AGENTIC / "mooncake-delta.yaml").read_text()
                                     .replace("mooncake-delta.jsonl", "d.jsonl.gz"))
    assert compile_file(tmp_path / "c.yaml").plan.records.traffic.source == \
        compile_file(AGENTIC / "mooncake-delta.yaml").plan.records.traffic.source


DELTA = '{"session_id":"a","timestamp":0,"input_length":8,"output_length":1,"hash_ids":[1,2]}\n'
NODE = '{"request_id":"a","timestamp":0,"input_length":8,"output_length":1,"hash_ids":[1,2]}\n'


@pytest.mark.parametrize("fmt, text, line, col, code, pointer, words", [
    ("mooncake-delta", DELTA + '{"session_id":"a","input_length":8,"hash_ids":[3,4]}\n', 2, 1, "TRACE-ROW", "",
     "missing `output_length`"),
    ("mooncake-delta", DELTA + '{"session_id":[1],"output_length":1,"hash_ids":[3]}\n', 2, 2, "TRACE-ROW",
     "/session_id", "string or an integer"),
    ("mooncake-delta", DELTA + '{"session_id":"a","output_length":1,"input_length":8,"hash_ids":[3]}\n', 2, 54,
     "TRACE-ROW", "/hash_ids", "1 hash_ids for 8 tokens"),
    ("mooncake-delta", DELTA + '{"session_id":"a","delay":-1,"input_length":4,"output_length":1,"hash_ids":[3]}\n',
     2, 19, "TRACE-ROW", "/delay", "milliseconds"),
    ("mooncake-delta", DELTA + "{oops\n", 2, 2, "TRACE-ROW", "", "not valid JSON"),
    ("agentic_mooncake", NODE + '{"request_id":"b","wait_for":["zz"],"input_length":8,"output_length":1,'
     '"hash_ids":[1,3]}\n', 2, 19, "TRACE-DEPENDENCY", "/wait_for", "no row's request_id"),
    ("agentic_mooncake", NODE + '{"request_id":"b","wait_for":["c"],"input_length":4,"output_length":1,'
     '"hash_ids":[5]}\n{"request_id":"c","wait_for":["b"],"input_length":4,"output_length":1,"hash_ids":[6]}\n',
     2, 19, "TRACE-DEPENDENCY", "/wait_for", "cycle"),
    ("agentic_mooncake", NODE + '{"wait_for":["a"],"input_length":4,"output_length":1,"hash_ids":[5]}\n', 2, 1,
     "TRACE-DEPENDENCY", "", "request_id"),
    ("agentic_mooncake", NODE + '{"request_id":"b","tool_wait_ms":"soon","input_length":4,"output_length":1,'
     '"hash_ids":[5]}\n', 2, 19, "TRACE-ROW", "/tool_wait_ms", "milliseconds"),
])
def test_a_bad_row_is_reported_at_its_field(tmp_path, fmt, text, line, col, code, pointer, words):
    (tmp_path / "bad.jsonl").write_text(text)
    (tmp_path / "c.yaml").write_text(f"""engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      kv_cache: {{block_size: 4, capacity: {{type: fixed, blocks: 64}}}}
traffic:
  source: {{type: trace, format: {fmt}, block_size: 4, paths: [bad.jsonl]}}
""")
    diagnostic, = compile_file(tmp_path / "c.yaml").diagnostics
    assert (diagnostic.code, diagnostic.pointer) == (code, pointer) and diagnostic.source.endswith("bad.jsonl")
    assert (diagnostic.span.line, diagnostic.span.col) == (line, col)
    assert words in diagnostic.message and diagnostic.hint
    assert diagnostic.named_by.pointer == "/traffic/source/paths/0"


def test_the_text_report_names_file_line_col(tmp_path, capsys):
    (tmp_path / "bad.jsonl").write_text(NODE + NODE)
    config = tmp_path / "c.yaml"
    config.write_text((AGENTIC / "agentic-mooncake-g2.yaml").read_text().replace("agentic-mooncake-g2.jsonl",
                                                                                  "bad.jsonl"))
    assert main(["validate", str(config)]) == 1
    out = capsys.readouterr().err
    assert f"{tmp_path / 'bad.jsonl'}:2:2: error[TRACE-DEPENDENCY]" in out and "Traceback" not in out
    assert orjson.loads(NODE)["request_id"] == "a"


def test_agentic_plays_are_not_flattened_into_a_replayspec(tmp_path, capsys):
    """A ReplaySpec has fixed arrivals only: lowering a play would lose who waits for whom (the AgentX fixture: the
    child waits for the parent, the resume for the child; the side request is a root), so it is refused at
    `traffic.source.format` with what would be lost, and nothing is written."""
    out = tmp_path / "spec.json"
    config = EXAMPLES / "agentic" / "agentx-g2-local.yaml"
    assert main(["compile", str(config), "--to", "replayspec", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{config}:4:13: error[REPLAYSPEC-AGENTIC] traffic.source.format: ")
    assert "lose the dependencies of 2 of its 4 requests (1 play), `agentic_lanes: 1`" in err
    assert "hint: replay the config with `kvreplay predict`" in err and not out.exists()
    assert main(["compile", str(config), "--to", "replayspec", "-o", str(out), "--set",
                 "traffic.load.agentic_warmup=true"]) == 1
    assert "`agentic_lanes: 1`, `agentic_warmup`" in capsys.readouterr().err


def test_a_mooncake_delta_trace_still_lowers_like_session_traffic(tmp_path, capsys):
    """mooncake-delta sessions are session turns (as synthetic sessions): lowered with the arrivals they had."""
    out = tmp_path / "spec.json"
    assert main(["compile", str(EXAMPLES / "agentic" / "mooncake-delta.yaml"), "--to", "replayspec", "-o",
                 str(out)]) == 0
    capsys.readouterr()
    spec = orjson.loads(out.read_bytes())
    assert [r["arrival_time_ms"] for r in spec["requests"]] == [0.0, 5.0, 15.0, 30.0]
