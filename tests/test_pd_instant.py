"""P/D without `kv_transfer`: an instant handoff lands in the instant its trigger happens (facts section 97).

AISimulate applies every completion and landing of an instant before any worker
starts a pass then.  A handoff with no transfer delay is therefore reserved when
its prefill ends beside an idle decode worker (or when the decode worker's pass
ends), lands at once, lets its source go at once, and joins the decode pass
that starts in that instant.

Scenario (AISimulate's numbers, every record equal): Qwen3-32B, fixed 20 ms
prefill / 10 ms decode on both roles, two requests of 100 + 40 tokens arriving
together (concurrency 2), no `kv_transfer`:

- A is prefilled 0-20 ms; at 20 it is reserved, activated and admitted on the
  idle decode worker and its source lets go at 20, before the prefill worker
  starts B's pass (20-40); A's first token ends the pass 20-30, its 40th
  the pass 410-420 (one token a pass);
- B's prefill ends at 40, when A's pass 30-40 ends: B is admitted in the pass
  from 40, first token 50, last 440.  Before, kvreplay reserved B in the decode
  pass start at 40 and the landing came after that pass had started: admitted
  at 50 (10 ms later), last token 450, and A's source let go at 40.
"""
from __future__ import annotations

import pytest

from kvreplay.compiler.pipeline import compile_bytes

from .scenarios import replay_both_ways
from .test_replay import replay

INSTANTS = ("prefill_admit_ms", "source_held_ms", "source_released_ms", "destination_reserved_ms",
            "destination_activated_ms", "decode_admit_ms", "first_token_ms", "last_token_ms")


def _config(tmp_path, backend: str, speculation: str = "", requests: int = 2):
    path = tmp_path / f"{backend}.yaml"
    role = """      timing: {type: fixed, prefill_ms: 20.0, decode_ms: 10.0}
      kv_cache: {capacity: {type: fixed, blocks: 2000}, block_size: 64}
"""
    path.write_text(f"""engine:
  mode: disaggregated
  backend: {backend}
  model: Qwen/Qwen3-32B
  hardware: h200_sxm
{speculation}  workers:
    prefill:
{role}    decode:
{role}traffic:
  source: {{type: synthetic, input_tokens: 100, output_tokens: 40}}
  load: {{type: concurrency, concurrency: 2}}
  stop: {{requests: {requests}}}
""")
    return path


def _instants(tmp_path, config) -> list[list[float]]:
    _, records = replay(config, tmp_path / "out")
    records.sort(key=lambda r: (r["arrival_time_ms"], r["prefill_admit_ms"]))
    return [[r[field] for field in INSTANTS] for r in records]


@pytest.mark.parametrize("backend", ["vllm", "trtllm"])
def test_an_instant_handoff_joins_the_decode_pass_that_starts_when_its_prefill_ends(tmp_path, backend):
    # prefill, held, released, reserved, activated, decode admission, first and last token (40 tokens, 10 ms each)
    assert _instants(tmp_path, _config(tmp_path, backend)) == [
        [0.0, 20.0, 20.0, 20.0, 20.0, 20.0, 30.0, 30.0 + 39 * 10],
        [20.0, 40.0, 40.0, 40.0, 40.0, 40.0, 50.0, 50.0 + 39 * 10]]


def test_an_instant_handoff_under_speculation_joins_the_same_pass(tmp_path):
    """One ngram draft accepted at rate 1: the admission pass samples the first token (it draws nothing), every
    later pass emits 2, so 39 tokens take 20 passes (the last one cut to 1): last token = first + 200 ms."""
    speculation = "  speculation: {kind: ngram, num_speculative_tokens: 1, acceptance_rates: [1.0]}\n"
    assert _instants(tmp_path, _config(tmp_path, "vllm", speculation)) == [
        [0.0, 20.0, 20.0, 20.0, 20.0, 20.0, 30.0, 30.0 + 20 * 10],
        [20.0, 40.0, 40.0, 40.0, 40.0, 40.0, 50.0, 50.0 + 20 * 10]]


def test_a_handoff_with_a_transfer_still_lands_after_it_is_reserved(tmp_path):
    """With a link the reservation stays at the decode worker's pass start and the KV lands a transfer later:
    100 tokens x 262,144 B (Qwen3-32B: 64 layers x 8 KV heads x 128 x 2 x 2 B) at 26.2144 GB/s = 1 ms.  A lands
    at 21 on an idle decode worker, its source lets go at 40 (the end of B's prefill pass, running then); B's
    prefill ends at 40, during A's pass 31-41, is reserved at 41 and lands at
    42, during A's pass 41-51: activated and admitted at 51, its source let go then (the prefill worker is idle)."""
    config = _config(tmp_path, "vllm")
    config.write_text(config.read_text().replace(
        "  workers:", "  kv_transfer: {bandwidth_gb_per_second: 26.2144, timing_mode: full_prompt}\n  workers:"))
    assert _instants(tmp_path, config) == [
        [0.0, 20.0, 40.0, 20.0, 21.0, 21.0, 31.0, 31.0 + 39 * 10],
        [20.0, 40.0, 51.0, 41.0, 51.0, 51.0, 61.0, 61.0 + 39 * 10]]


def test_instant_handoffs_give_the_same_records_with_macro_steps_and_single_stepped(tmp_path):
    """Eight requests at concurrency 2 (handoffs landing beside running decode passes, which macro steps fuse)."""
    config = _config(tmp_path, "vllm", requests=8)
    result = compile_bytes(config.read_bytes(), str(config), ())
    _, _, records = replay_both_ways(result.plan.to_dict(), tmp_path)
    assert len(records) == 8
    # each request that ends lets the next one in: its prefill ends 20 ms later and it is admitted then, so the
    # k-th pair is admitted at 20 + 420 k and 40 + 420 k (AISimulate's instants too)
    assert sorted(r["decode_admit_ms"] for r in records) == [20.0 + 420 * k + 20 * i for k in range(4) for i in (0, 1)]


def test_a_destination_missing_handoff_that_moves_nothing_lands_when_it_is_reserved(tmp_path):
    """A link (100 tokens a ms), `destination_missing`, and one 128-token prompt (two whole blocks of 64) four times:
    at 0, 105, 205 and 210 ms.  The first moves 128 tokens (1.28 ms); the decode rank then holds both blocks, so the
    others move nothing and land in the instant of their reservation, as without a link: B is prefilled 105-125 and
    admitted at 125; C's prefill ends at 225 with B's last pass, C is admitted at 225 and its source let go before D's
    prefill pass (225-245) starts; D's prefill ends at 245 with C's pass 235-245: admitted at 245 (AISimulate's
    instants, every record; before, C's source was let go at 245 and D admitted at 255)."""
    trace = tmp_path / "repeat.jsonl"
    trace.write_text("".join(f'{{"timestamp": {t}, "input_length": 128, "output_length": 10, "hash_ids": [0, 1]}}\n'
                             for t in (0, 105, 205, 210)))
    config = _config(tmp_path, "vllm")
    text = config.read_text().replace(
        "  workers:", "  kv_transfer: {bandwidth_gb_per_second: 26.2144, timing_mode: destination_missing}\n  workers:")
    config.write_text(text[:text.index("traffic:")] + f"""traffic:
  source: {{type: trace, paths: [{trace}], format: mooncake, block_size: 64}}
  load: {{type: trace_timestamps, speedup: 1.0}}
""")
    first = 20.0 + 1.28  # the only transfer that moves tokens
    assert _instants(tmp_path, config) == [
        [0.0, 20.0, first, 20.0, first, first, first + 10, first + 100],
        [105.0, 125.0, 125.0, 125.0, 125.0, 125.0, 135.0, 225.0],
        [205.0, 225.0, 225.0, 225.0, 225.0, 225.0, 235.0, 325.0],
        [225.0, 245.0, 245.0, 245.0, 245.0, 245.0, 255.0, 345.0]]
