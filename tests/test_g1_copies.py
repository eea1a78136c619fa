"""G1 keeping every computed copy of a key (`BlockPool.keep_copies`, on every vLLM rank; facts §45, §54).

The mocker's vLLM pool lets a cached hash have several physical copies: a block computed again while its key is
cached (a state cache resumes only at a snapshot, so the cached token blocks past it are recomputed) is cached
too.  A lookup finds the oldest copy; evicting it makes the next one the copy found, and only the last copy's
eviction removes the key (one eviction, one "Removed" event).  A copy is freed to the queue's tail like any
cached block, where a pool without copies frees the recomputed block as keyless memory to its head.  The mocker
has one such pool for every vLLM rank, so every vLLM rank of kvreplay keeps copies (`Engine.equip`); SGLang's radix
cache and TensorRT-LLM's pool do not.
"""
from __future__ import annotations

import pytest

from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.build import build
from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.tiers.g1_runs import RunPool

from .support import ROOT
from .test_g1_runs import drive
from .test_replay import replay


def _two_copies(kind):
    pool = kind(6)
    pool.keep_copies()
    pool.events = []
    first, again = pool.allocate(2), pool.allocate(2)  # blocks [0, 1], then [2, 3]: keys 10, 11 computed twice
    pool.register_run(first, [10, 11], 0, 2)
    pool.register_run(again, [10, 11], 0, 2)
    return pool, first, again


@pytest.mark.parametrize("kind", [BlockPool, RunPool])
def test_a_recomputed_block_is_a_cached_copy(kind):
    pool, first, again = _two_copies(kind)
    assert pool.cached == {10: 0, 11: 1} and pool.copies == {10: [2], 11: [3]}
    assert pool.key_of[:4] == [10, 11, 10, 11]
    assert pool.events == [("Stored", [10, 11])]  # (a copy makes no key newly visible)
    pool.release(first)
    pool.release(again)
    assert list(pool.free) == [1, 0, 3, 2]  # copies at the tail, last block first, as cached blocks


@pytest.mark.parametrize("kind", [BlockPool, RunPool])
def test_evicting_the_first_copy_leaves_the_next_one_found(kind):
    pool, first, again = _two_copies(kind)
    pool.release(first)
    pool.release(again)
    assert pool.allocate(2) == [4, 5]  # never-used blocks first
    assert pool.allocate(1) == [1]  # key 11's first copy: block 3 is found now, nothing is evicted
    assert pool.match([10, 11], 2) == [0, 3] and pool.evictions == 0
    assert pool.allocate(2) == [0, 3]  # key 10 passes to block 2; block 3 was key 11's last copy
    assert pool.match([10, 11], 2) == [2] and pool.cached == {10: 2} and pool.copies == {}
    assert pool.evictions == 1 and pool.events[-1] == ("Removed", [11])


@pytest.mark.parametrize("kind", [BlockPool, RunPool])
def test_without_copies_a_recomputed_block_is_keyless_memory(kind):
    pool = kind(6)
    first, again = pool.allocate(2), pool.allocate(2)
    pool.register_run(first, [10, 11], 0, 2)
    pool.register_run(again, [10, 11], 0, 2)
    assert pool.copies is None and pool.key_of[2:4] == [None, None]
    pool.release(first)
    pool.release(again)
    assert list(pool.free) == [3, 2, 1, 0]  # the recomputed blocks at the head: handed out first


def test_run_pool_matches_the_block_pool_with_copies():
    """Random traffic whose hits are cut short (resumes at a snapshot), so keys get copies; both pools agree after
    every step, and every keyed block is its key's first copy or one of its copies."""
    for seed in range(6):
        assert drive(seed, capacity=48, steps=400, prompts=5, prompt_blocks=12, copies=True) > 0


@pytest.mark.parametrize("kind", [BlockPool, RunPool])
def test_a_copy_is_kept_without_an_event_list_too(kind):
    """The pools' fast paths (no KV events captured) keep copies as the event-keeping ones do: with 4 blocks, keys
    10 and 11 computed twice ([0, 1] then [2, 3]) and everything freed, two fresh blocks evict the first copies and
    both keys are still found, in the second ones."""
    pool = kind(4)
    pool.keep_copies()
    first, again = pool.allocate(2), pool.allocate(2)
    pool.register_run(first, [10, 11], 0, 2)
    pool.register_run(again, [10, 11], 0, 2)
    pool.release(first)
    pool.release(again)
    assert sorted(pool.allocate(2)) == first  # (freed last block first)
    assert pool.match([10, 11], 2) == again
    assert pool.evictions == 0


PD = """engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    prefill: {kv_cache: {capacity: {type: fixed, blocks: 300}}}
    decode: {kv_cache: {capacity: {type: fixed, blocks: 300}}}
traffic:
  source: {type: synthetic, input_tokens: 100, output_tokens: 10}
  load: {type: concurrency, concurrency: 1}
  stop: {requests: 1}
"""


@pytest.mark.parametrize("text, keeps", [
    (PD, {"prefill": True, "decode": True}),
    (PD.replace("h200_sxm", "h200_sxm\n  backend: sglang"), {"prefill": False, "decode": False}),
    (PD.replace("h200_sxm", "h200_sxm\n  backend: trtllm"), {"prefill": False, "decode": False}),
])
def test_every_vllm_rank_keeps_copies(tmp_path, text, keeps):
    result = compile_bytes(text.encode(), str(tmp_path / "c.yaml"), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    replay_ = build(finish_plan(result.plan.to_dict(), tmp_path))
    assert {rank.role: getattr(rank.pool, "copies", None) is not None for rank in replay_.ranks()} == keeps


def test_the_decode_pool_keeps_a_transferred_copy_as_aisimulate(tmp_path):
    """docs/reference-runs/fidelity/t21-syn-pd-missing (P/D, destination_missing at 25 GB/s, 3,000 blocks of 512 per
    role, the vendored synthetic trace): the decode pool keeps the copies its handoffs and readmissions write of
    keys it caches already, so it evicts differently.  Two requests find fewer of their prompt's blocks on the
    decode rank (15,360 -> 12,800 and 2,560 -> 0 tokens) and transfer more (1,024 -> 3,584 and 512 -> 3,072), and
    the mean TTFT moves 202.14496 -> 202.15176 ms, AISimulate's 202.15176 (§22's set: the only vLLM change besides
    t23-syn-pd-2x1, whose TTFT moves 182.1841 -> 182.2395 against AISimulate's 182.3154)."""
    text = (ROOT / "docs/reference-runs/fidelity/t21-syn-pd-missing.yaml").read_text().replace(
        "../../../tests/data/traces/", str(ROOT / "tests/data/traces") + "/")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    summary, records = replay(path, tmp_path / "out")
    moved = {r["decode_admit_ms"]: (r["decode_cached_input_tokens"], r["kv_transfer_tokens"]) for r in records
             if r.get("decode_admit_ms") in (951363.139293, 999664.019899)}
    assert moved == {951363.139293: (12800, 3584), 999664.019899: (0, 3072)}
    assert round(summary["mean_ttft_ms"], 5) == 202.15176  # AISimulate 202.15176331768436
    assert round(summary["prefix_cache_reused_ratio"], 6) == 0.242601  # AISimulate 0.24260087 (unchanged)
