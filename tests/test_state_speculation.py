"""State ranks under speculation take their bursts' KV as the pass emits (issue 15 items 4 and 6, facts section 89):
the largest burst's token blocks, and the fresh state a decode owes when its pass leaves it on a block boundary
with drafts to verify, counted together after admission; short, the newest running request is preempted.  The
numbers are AISimulate's requests.jsonl for the same configs (DeepSeek V4 `pass_ends`, Kimi K3 align mode)."""
from __future__ import annotations

import pytest

from .support import ROOT
from .test_replay import replay

DSV4 = """engine:
  model: deepseek-ai/DeepSeek-V4-Flash
  hardware: b200_sxm
  speculation: {{kind: ngram, num_speculative_tokens: {drafts}, acceptance_rates: {rates}}}
  workers:
    aggregated:
      parallelism: {{tensor: 4, moe_expert: 4}}
      timing: {{type: fixed, prefill_ms: 20.0, decode_ms: 10.0}}
      kv_cache:
        capacity: {{type: fixed, blocks: 100}}
        state_cache: {{}}
traffic:
  source: {{type: synthetic, input_tokens: {prompt}, output_tokens: 20}}
  load: {{type: concurrency, concurrency: 2}}
  stop: {{requests: 2}}
"""

KIMI = """engine:
  model: moonshotai/Kimi-K3
  hardware: b200_sxm
  speculation: {kind: ngram, num_speculative_tokens: 1, acceptance_rates: [1.0]}
  workers:
    aggregated:
      parallelism: {tensor: 8, moe_expert: 8}
      timing: {type: fixed, prefill_ms: 20.0, decode_ms: 10.0}
      kv_cache:
        block_size: 128
        bytes_per_token: 13824
        capacity: {type: fixed, blocks: 14}
        state_cache: {}
traffic:
  source: {type: synthetic, input_tokens: 1535, output_tokens: 20}
  load: {type: concurrency, concurrency: 2}
  stop: {requests: 2}
"""


def _run(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    summary, records = replay(path, tmp_path / "out")
    return summary, sorted([a["at_ms"] for a in r["admission_history"]] for r in records)


def test_a_decode_leaving_a_block_boundary_with_a_draft_counts_its_fresh_state_as_it_emits(tmp_path):
    """DeepSeek V4 (256-token blocks, 30 state rows), 100 rows, two 511 + 20-token requests, one draft always
    accepted.  At 0 ms both prompts take 2 token blocks + 30 state each (36 free).  At 20 ms each decode reaches
    512 tokens, a block boundary, with a draft at 512: its burst needs a third token block and the next block's
    30 fresh state rows, 62 for both with 36 free, so B (the newest) is preempted as the pass emits, its decode
    still priced; A alone needs 31.  At 30 ms A takes its fresh state (the old rows go at once, `pass_ends`) and B
    is readmitted (recomputing 512 tokens).  AISimulate: admissions [0] and [0, 30], duration 150 ms, TPOT
    6.579 ms (main reserved one slot per draft as each decode was scheduled and preempted nobody: 120 ms)."""
    summary, admissions = _run(tmp_path, DSV4.format(drafts=1, rates=[1.0], prompt=511))
    assert admissions == [[0.0], [0.0, 30.0]]
    assert summary["duration_ms"] == 150.0 and summary["mean_tpot_ms"] == pytest.approx(6.578947368421053)


@pytest.mark.parametrize("drafts, rates, prompt, admissions, duration", [
    # two drafts from 511 tokens: they verify 511 and 512, entering block 3 inside the burst: no fresh state
    # counted then (it is owed at the next pass, as without drafts), nobody preempted: AISimulate 90 ms
    (2, [1.0, 1.0], 510, [[0.0], [0.0]], 90.0),
    (2, [1.0, 0.0], 510, [[0.0], [0.0]], 120.0),
    # from 512 tokens, a block boundary, as in the test above: B preempted at 20 ms (AISimulate 120 ms)
    (2, [1.0, 1.0], 511, [[0.0], [0.0, 30.0]], 120.0),
])
def test_only_a_pass_ending_on_the_boundary_counts_the_fresh_state(tmp_path, drafts, rates, prompt, admissions,
                                                                  duration):
    summary, got = _run(tmp_path, DSV4.format(drafts=drafts, rates=rates, prompt=prompt))
    assert (got, summary["duration_ms"]) == (admissions, duration)


def test_align_mode_lets_the_old_state_go_after_the_pass_whose_drafts_read_it(tmp_path):
    """Kimi K3 (1,536-token blocks, 3 state blocks), 14 blocks, two 1,535 + 20-token requests, one draft always
    accepted.  At 0 ms 4 blocks each (6 free); at 20 ms both decodes reach 1,536 with a draft past it: 1 token
    block + 3 fresh state each, 8 > 6, so B is preempted (10 free) and A takes its token block (9).  At 30 ms A's
    fresh state takes 3 and, since the drafts of its last pass already read the old state, the old 3 go back at
    once (align mode otherwise holds them through this pass): 9 free, B readmitted with 4, its recompute's burst
    1 more.  AISimulate: admissions [0] and [0, 30], duration 150 ms (main: [0, 40], 180 ms)."""
    summary, admissions = _run(tmp_path, KIMI)
    assert admissions == [[0.0], [0.0, 30.0]]
    assert summary["duration_ms"] == 150.0


def test_heldout4_s05_agrees_with_aisimulate_on_every_request(tmp_path):
    """docs/reference-runs/heldout4/s05 (DeepSeek V4, one draft always accepted, 300 rows, three-turn sessions at
    concurrency 6): every request's admissions and tokens equal AISimulate's, so the summary is its: duration
    12,166 ms, TTFT 168.61 ms, TPOT 5.77313 ms, 24 readmissions (main: 12,072 ms, 21, 25 of 36 requests apart:
    state ranks reserved one slot per draft as each decode was scheduled)."""
    summary, records = replay(ROOT / "docs" / "reference-runs" / "heldout4" / "s05-dsv4-ngram1-widened-g300-fixed.yaml",
                              tmp_path / "out")
    assert (summary["duration_ms"], summary["completed_requests"]) == (12166.0, 36)
    assert summary["mean_ttft_ms"] == pytest.approx(168.61111111111111, rel=1e-12)
    assert summary["mean_tpot_ms"] == pytest.approx(5.773132664437013, rel=1e-12)
    assert sum(r["readmission_count"] for r in records) == 24
