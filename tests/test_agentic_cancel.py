"""An agentic profile cancels the requests still open `response_grace_seconds` after its admission deadline
(runtime/shell/arrivals.py `cancel_open`, each engine's `cancel`).  Two single-request plays on two lanes, block /
page 4, fixed timing 2 ms prefill / 3 ms decode: A (16 tokens, 3,000 out) and B (24 tokens, 100 out) start at 0;
B ends at 299 ms and its lane takes the corpus's next play, A again (A#1, fresh block ids); the deadline is 1 s,
the grace 0.5 s.  Every per-request number asserted here is AISimulate's (0.13.0.dev, the same config,
`predict --capture-per-request`), for both backends."""
from __future__ import annotations

import orjson
import pytest

from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.build import build
from kvreplay.runtime.outputs.metrics import request_record, summary

PLAYS = [{"id": "p1", "models": ["m"], "block_size": 4, "hash_id_scope": "local",
          "requests": [{"t": 0.0, "type": "s", "in": 16, "out": 3000, "hash_ids": [1, 2, 3, 4], "model": "m"}]},
         {"id": "p2", "models": ["m"], "block_size": 4, "hash_id_scope": "local",
          "requests": [{"t": 0.0, "type": "s", "in": 24, "out": 100, "hash_ids": [7, 8, 9, 10, 11, 12],
                        "model": "m"}]}]

CONFIG = """traffic:
  source: {{type: trace, format: weka, block_size: 4, paths: [plays.jsonl]}}
  load: {{type: trace_timestamps, agentic_lanes: 2, agentic_snapshot: {{seed: 42}},
         agentic_profile: {{duration_seconds: 1, response_grace_seconds: 0.5, cancel_drain_seconds: 0.2}}}}
engine:
  mode: aggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  backend: {backend}
  context_length: 8192
  workers:
    aggregated:
      scheduler: {{max_batched_tokens: 64, max_sequences: 4}}
      kv_cache:
        block_size: 4
        prefix_caching: true
        capacity: {{type: fixed, blocks: 4000}}
      timing: {{type: fixed, prefill_ms: 2, decode_ms: 3}}
"""


def replay(tmp_path, backend: str, sequences: int = 4, plays: list | None = None, lanes: int = 2, blocks: int = 4000):
    """The replay of the two plays on `backend`, single-stepped with KV events captured, run and closed (a run
    with macro steps must give the same records and end)."""
    (tmp_path / "plays.jsonl").write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in plays or PLAYS))
    text = CONFIG.format(backend=backend).replace("max_sequences: 4", f"max_sequences: {sequences}")
    text = text.replace("agentic_lanes: 2", f"agentic_lanes: {lanes}").replace("blocks: 4000", f"blocks: {blocks}")
    result = compile_bytes(text.encode(), str(tmp_path / "cancel.yaml"), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    fused = build(finish_plan(result.plan.to_dict(), tmp_path))
    run = build(finish_plan(result.plan.to_dict(), tmp_path), single_step=True)
    events = run.capture_kv_events()
    for each in (fused, run):
        each.run()
    assert fused.close() == (end := run.close())
    assert rows(fused) == rows(run)
    return run, events, end


def rows(run) -> list[tuple]:
    """(arrival, first token, last token, status, terminal time, prompt, output) of each request, by arrival and prompt."""
    out = []
    for request in run.requests:
        r = request_record(request)
        out.append((r["arrival_time_ms"], r["first_token_ms"], r["last_token_ms"], r["terminal_status"],
                    r["terminal_time_ms"], r["input_length"], r["output_length"]))
    return sorted(out, key=lambda r: (r[0], r[5]))


@pytest.mark.parametrize("backend, a1_first, a1_out", [("sglang", 301.0, 400), ("vllm", 304.0, 399)])
def test_requests_open_at_the_grace_deadline_are_cancelled_then(tmp_path, backend, a1_first, a1_out):
    """A and A#1 are still decoding at 1,500 ms (deadline + grace): both end `canceled` there with the tokens their
    passes had produced by then (the last at 1,498; the pass 1,498-1,501 is lost).  A#1 starts at B's end (299 ms):
    SGLang extends it alone at 299-301; vLLM mixes its prefill into A's decode passes, so its first token is at
    304 and it has one token less.  The run stopped at 1,500; its duration ends at the last completion (B, 299)
    and its token totals count B only, as AISimulate's."""
    run, _, end = replay(tmp_path, backend)
    assert end == 1_500_000_000
    assert rows(run) == [(0.0, 2.0, 1498.0, "canceled", 1500.0, 16, 499),
                         (0.0, 2.0, 299.0, "completed", 299.0, 24, 100),
                         (299.0, a1_first, 1498.0, "canceled", 1500.0, 16, a1_out)]
    totals = summary(run.log, end, cut=True)
    assert (totals["duration_ms"], totals["completed_requests"], totals["total_input_tokens"],
            totals["total_output_tokens"]) == (299.0, 1, 24, 100)
    assert run.traffic.summary_section()["agentic_profile"]["canceled_requests"] == 2


def test_sglang_caches_a_cancelled_request_s_prompt_and_output(tmp_path):
    """SGLang's abort goes through cache_finished_req: at 1,500 ms A's prompt + 499 output tokens (515 tokens,
    128 whole pages; its 4 prompt pages were stored after its prefill) enter the tree, and A#1's 416 tokens
    (104 pages, 4 stored) likewise: two Stored events at the cancel, each on its own session's path.  Nothing is
    locked or private after it: the tree's 263 pages (4 + 6 + 25 for B + 4 + 124 + 100) are all evictable."""
    run, events, _ = replay(tmp_path, "sglang")
    at_cancel = [(e["type"], len(e["block_hashes"]), e["session_id"]) for e in events.records
                 if e["time_ms"] == 1500.0]
    assert at_cancel == [("Stored", 124, "p1:root"), ("Stored", 100, "p1#1:root")]
    pool = run.ranks()[0].pool
    assert (pool.tree_tokens, pool.evictable, pool.private) == (263 * 4, 263 * 4, 0)


def test_vllm_frees_a_cancelled_request_s_blocks_and_keeps_them_cached(tmp_path):
    """vLLM's abort frees the request's blocks like a finish: no event at the cancel (nothing is removed), every
    block free again, and the full blocks cached stay cached (vLLM caches a block when a pass is scheduled to
    compute it: A's 515 tokens, its last in the pass the cancel lost, fill 128 blocks, B's 123 computed 30 and
    A#1's 415 fill 103: 261)."""
    run, events, _ = replay(tmp_path, "vllm")
    assert [e for e in events.records if e["time_ms"] == 1500.0] == []
    assert not any(e["type"] != "Stored" for e in events.records)
    pool = run.ranks()[0].pool
    assert (pool.free_count, len(pool.cached)) == (4000, 261)


@pytest.mark.parametrize("backend", ["sglang", "vllm"])
def test_a_request_still_waiting_is_cancelled_too(tmp_path, backend):
    """One running slot: A decodes alone (tokens at 2, 5, ..., 1,499: 500) and B waits all along; at 1,500 both are
    cancelled, B with no token.  SGLang caches A's 516 tokens (129 pages: 125 stored at the cancel) and frees
    nothing B held (it held nothing).  vLLM keeps 129 blocks cached: it caches a block when a pass is scheduled to
    compute it, and the pass lost at the cancel (1,499-1,502) was computing A's 516th token, which fills the 129th."""
    run, events, _ = replay(tmp_path, backend, sequences=1)
    assert rows(run) == [(0.0, 2.0, 1499.0, "canceled", 1500.0, 16, 500),
                         (0.0, None, None, "canceled", 1500.0, 24, 0)]
    pool = run.ranks()[0].pool
    if backend == "sglang":
        assert [len(e["block_hashes"]) for e in events.records if e["time_ms"] == 1500.0] == [125]
        assert (pool.tree_tokens, pool.evictable, pool.private) == (516, 516, 0)
    else:
        assert (pool.free_count, len(pool.cached)) == (4000, 129)


# p1 gets a second request after A (32 tokens, waiting for A); p3 (8,000 tokens) can never fit 1,000 blocks of 4
P3 = {"id": "p3", "models": ["m"], "block_size": 4, "hash_id_scope": "local",
      "requests": [{"t": 0.0, "type": "s", "in": 8000, "out": 10, "hash_ids": list(range(100, 2100)), "model": "m"}]}
PLAYS_3 = [{**PLAYS[0], "requests": [*PLAYS[0]["requests"], {"t": 0.0, "type": "s", "in": 32, "out": 10,
                                                                "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8], "model": "m"}]},
           PLAYS[1], P3]


def test_play_outcomes_name_their_failure_as_aisimulate_does(tmp_path):
    """Three lanes, G1 1,000 blocks.  A play whose request was rejected is `failed` when it settles (p3 at 2 ms and
    its next incarnation at 606: failure_status rejected); a play whose request the profile cancelled is
    `incomplete`, failure_status canceled, its causal terminal the cancel at 1,500 ms; completed plays settle at
    their last response (p2 at 301, p2#1 at 603).  AISimulate 0.13's outcomes on the same config (vLLM), in play
    order: the same statuses, failures and times, completed_trajectories 2 of 7 (facts §53).  The cancel drain
    ends at once (offline engines acknowledge synchronously), bounded at 1,500 + 200 ms, not timed out."""
    run, _, end = replay(tmp_path, "vllm", plays=PLAYS_3, lanes=3, blocks=1000)
    section = run.traffic.summary_section()
    got = [(o["play_id"], o["status"], o.get("failure_status"), o.get("failure_request_id"), o["causal_terminal_ms"],
            o.get("settled_at_ms")) for o in section["agentic_play_outcomes"]]
    assert got[0] == ("p1", "incomplete", "canceled", "p1:request:0", 1500.0, None)
    assert got[2] == ("p3", "failed", "rejected", "p3:request:0", 2.0, 2.0)
    assert [g[1:3] for g in got] == [("incomplete", "canceled"), ("completed", None), ("failed", "rejected"),
                                     ("incomplete", "canceled"), ("completed", None), ("failed", "rejected"),
                                     ("incomplete", "canceled")]
    assert [g[4] for g in got] == [1500.0, 301.0, 2.0, 1500.0, 603.0, 606.0, 1500.0]
    assert (section["completed_trajectories"], section["incomplete_trajectories"], section["total_trajectories"]) \
        == (2, 5, 7)
    profile = section["agentic_profile"]
    assert (profile["response_grace_deadline_ms"], profile["cancel_drain_deadline_ms"],
            profile["cancel_drain_timed_out"]) == (1500.0, 1700.0, False)
    assert end == 1_500_000_000
