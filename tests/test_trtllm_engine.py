"""TensorRT-LLM's engine (runtime/engines/trtllm.py): the guaranteed-no-evict capacity scheduler.

Rules checked: a waiting request starts only when the blocks of its whole sequence (prompt + every output token,
less its cached prefix) fit beside the blocks running requests still need to reach their end; the first that does
not fit stops admission (no overtaking); a started request is never preempted; reused blocks need no new block.
Block size 4 throughout, as in test_scheduler.py, whose request and rank builders these tests use.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvreplay.runtime.engines.engine import VLLM
from kvreplay.runtime.engines.table import engine_for
from kvreplay.runtime.engines.trtllm import TRTLLM, no_evict, to_completion, whole_footprints
from kvreplay.runtime.serving.speculation import Speculation
from kvreplay.runtime.timing.fixed import fixed_timing

from .scenarios import aggregated_config, compile_scenario, replay_both_ways, row
from .support import TRAFFIC, codes, compile_yaml
from .test_scheduler import make_rank, make_request

MS = 1_000_000
TIMING = fixed_timing(10 * MS, 1 * MS)


def trt_rank(blocks: int, **knobs):
    rank = make_rank(blocks, **knobs)
    TRTLLM.equip(rank)
    return rank


def step(engine, rank, now: int):
    batch = engine.schedule(rank, now)
    assert batch is not None
    end = now + TIMING(batch.work)
    items = [(r.spec.index, new) for r, new in batch.items]
    finished = [r.spec.index for r in engine.finish(rank, batch, end)]
    return items, end, finished


def run(engine, rank, now: int = 0) -> tuple[int, dict[int, int]]:
    """Run to the end; (end time, request index -> when its first pass started)."""
    started: dict[int, int] = {}
    while rank.busy:
        items, end, _ = step(engine, rank, now)
        for index, _ in items:
            started.setdefault(index, now)
        now = end
    return now, started


def test_the_table_gives_each_backend_its_engine():
    assert engine_for("trtllm") is TRTLLM and engine_for("vllm") is VLLM
    assert TRTLLM.fusable  # pure decode passes fuse as in vLLM (no preemption can break them)


def test_a_request_starts_only_when_its_whole_sequence_fits():
    """10 blocks of 4; three requests of prompt 8, output 8 (4 blocks each to completion).  a needs 4; b needs 4
    plus the 2 a has yet to allocate (6 of the 8 left); c needs 4 + 2 + 2 = 8 of the 6 left: it waits, although
    its prompt alone (2 blocks) would fit, which is what vLLM admits."""
    rank = trt_rank(10)
    a, b, c = (make_request(i, 8, 8) for i in range(3))
    rank.waiting.extend([a, b, c])
    assert to_completion(rank, a) == 4
    items, _, _ = step(TRTLLM, rank, 0)
    assert items == [(0, 8), (1, 8)]
    assert list(rank.waiting) == [c]
    assert no_evict(rank, c, [], 2) == 8 and rank.pool.free_count == 6


def test_no_preemption_where_vllm_preempts():
    """The same three requests: vLLM admits all three at once and preempts c when the decodes need their third
    blocks; TensorRT-LLM runs a and b, then c after a's blocks are freed, and never preempts."""
    trt, vllm = trt_rank(10), make_rank(10)
    for rank in (trt, vllm):
        rank.waiting.extend(make_request(i, 8, 8) for i in range(3))
    trt_end, trt_started = run(TRTLLM, trt)
    vllm_end, vllm_started = run(VLLM, vllm)
    assert trt.preemptions == 0 and vllm.preemptions == 1
    assert vllm_started == {0: 0, 1: 0, 2: 0}
    # a and b: one 10 ms prefill pass, then 7 decode passes of 1 ms: both finish at 17 ms; c starts then
    assert trt_started == {0: 0, 1: 0, 2: 17 * MS}
    assert trt_end == 34 * MS


def test_the_first_request_that_does_not_fit_stops_admission():
    """a (prompt 8, output 24: 8 blocks) runs; b (prompt 16, output 8: 6 blocks) does not fit beside a's 6 blocks
    to come in 10; c (prompt 4, output 4: 2 blocks) would, but does not overtake b."""
    rank = trt_rank(10)
    a, b, c = make_request(0, 8, 24), make_request(1, 16, 8), make_request(2, 4, 4)
    rank.waiting.append(a)
    step(TRTLLM, rank, 0)
    rank.waiting.extend([b, c])
    items, _, _ = step(TRTLLM, rank, 10 * MS)
    assert items == [(0, 1)] and list(rank.waiting) == [b, c]


def test_a_cached_prefix_needs_no_new_block():
    """a (prompt 12, output 4) finishes and leaves its 3 prompt blocks cached; b shares a's first 8 prompt tokens
    (2 blocks reused, limit (12 - 1) // 4 = 2): it needs 4 - 2 = 2 new blocks to completion."""
    rank = trt_rank(4)
    a = make_request(0, 12, 4, source=7)
    rank.waiting.append(a)
    run(TRTLLM, rank)
    b = make_request(1, 12, 4, source=7)
    hits = rank.pool.match(b.keys, (12 - 1) // 4)
    assert len(hits) == 2
    assert no_evict(rank, b, hits, 1) == 2
    rank.waiting.append(b)
    items, _, _ = step(TRTLLM, rank, 100 * MS)
    assert items == [(1, 1)]  # TensorRT-LLM's own limit reaches the third block: the whole prompt is reused


TRACE = [row(0.0, 8, 8, [1, 2]), row(0.0, 8, 8, [3, 4]), row(0.0, 8, 8, [5, 6]), row(0.0, 8, 8, [1, 2])]


def _scenario(directory, backend: str):
    directory.mkdir()
    config = aggregated_config({}, g1_blocks=10).replace("hardware: h200_sxm", f"hardware: h200_sxm\n  backend: {backend}")
    plan = compile_scenario(directory, TRACE, config, f"{backend}.yaml")
    fused, _, records = replay_both_ways(plan, directory)
    return fused, records


def test_end_to_end_backend_trtllm_never_preempts(tmp_path):
    """A predict YAML with `backend: trtllm` runs this engine (macro-stepped and single-stepped alike): four
    requests of 4 blocks each in 10 blocks; vLLM preempts, TensorRT-LLM starts the last two when the first two
    end, and the fourth reuses the first's whole prompt (both blocks: TensorRT-LLM reuses the last token's too)."""
    trt, trt_records = _scenario(tmp_path / "trtllm", "trtllm")
    vllm, _ = _scenario(tmp_path / "vllm", "vllm")
    assert sum(r.preemptions for r in trt.ranks()) == 0
    assert sum(r.preemptions for r in vllm.ranks()) > 0
    assert [r["terminal_status"] for r in trt_records] == ["completed"] * 4
    assert [r["reused_input_tokens"] for r in trt_records] == [0, 0, 0, 8]
    assert [r.first_admit_ns // MS for r in trt.requests] == [0, 0, 17, 17]


def test_arrival_cuts_the_output_to_the_room_g1_leaves(tmp_path):
    """G1 of 4 blocks of 4 = 16 tokens (AISimulate's mocker normalises a TensorRT-LLM request so): prompt 4 asking
    for 40 runs with 12 output tokens; a prompt of 16 leaves no room for one output token and one of 20 does not
    fit: both rejected.  vLLM rejects the first too (its whole sequence needs 11 blocks)."""
    trace = [row(0.0, 4, 40, [1]), row(100.0, 16, 4, [2, 3, 4, 5]), row(200.0, 20, 4, [6, 7, 8, 9, 10])]
    results = {}
    for backend in ("trtllm", "vllm"):
        (tmp_path / backend).mkdir()
        config = aggregated_config({}, g1_blocks=4).replace("hardware: h200_sxm", f"hardware: h200_sxm\n  backend: {backend}")
        plan = compile_scenario(tmp_path / backend, trace, config, f"{backend}.yaml")
        results[backend] = replay_both_ways(plan, tmp_path / backend)[2]
    trt = results["trtllm"]
    assert [r["terminal_status"] for r in trt] == ["completed", "rejected", "rejected"]
    assert (trt[0]["output_length"], trt[0]["requested_output_length"]) == (12, 40)
    assert [r["terminal_status"] for r in results["vllm"]] == ["rejected"] * 3


def test_context_length_max_bounds_only_vllm(tmp_path):
    """`context_length: max` (the default) is the model's maximum context for vLLM (max_model_len) only; SGLang and
    TensorRT-LLM sequences are bounded by their KV pool alone, as in AISimulate (a 50,000-token prompt on
    Qwen3-32B, whose maximum is 40,960, completes there with both; facts §13)."""
    from kvreplay.compiler.passes.finish import finish_plan
    limits = {}
    for backend in ("vllm", "sglang", "trtllm"):
        (tmp_path / backend).mkdir()
        config = aggregated_config({}, g1_blocks=10).replace("hardware: h200_sxm", f"hardware: h200_sxm\n  backend: {backend}")
        plan = compile_scenario(tmp_path / backend, TRACE, config, f"{backend}.yaml")
        limits[backend] = finish_plan(plan, tmp_path / backend).context_length
    assert limits == {"vllm": 40960, "sglang": None, "trtllm": None}


PD = """
engine:
  mode: disaggregated
  model: Qwen/Qwen3-32B
  hardware: b200_sxm
  backend: {backend}
  kv_transfer: {{bandwidth_gb_per_second: 25.0, timing_mode: destination_missing}}
  workers:
    prefill:
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache: {{block_size: 32, capacity: {{type: fixed, blocks: 300}}}}
    decode:
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache: {{block_size: 32, capacity: {{type: fixed, blocks: 200}}}}
traffic:
  source: {{type: synthetic, input_tokens: 1000, output_tokens: 500}}
  load: {{type: concurrency, concurrency: 8}}
  stop: {{requests: 24}}
"""


def test_a_decode_rank_reserves_the_whole_sequence_before_taking_a_handoff():
    """P/D: a decode rank of 200 blocks of 32 takes a prefilled request (1,000 + 500 tokens: 47 blocks to
    completion) only when its whole sequence fits beside what the requests it holds still need: four at a time
    (4 x 47 = 188), and it never preempts; vLLM's decode rank takes the KV of any prompt that fits now and
    preempts when the decodes outgrow it."""
    from kvreplay.compiler.passes.finish import finish_plan
    from kvreplay.runtime.build import build
    from .support import compile_yaml
    runs = {}
    for backend in ("trtllm", "vllm"):
        replay = build(finish_plan(compile_yaml(PD.format(backend=backend)).plan.to_dict()))
        decode = [rank for rank in replay.ranks() if rank.role == "decode"]
        most = []
        replay.after_instant.append(lambda now: most.append(len(decode[0].running)))
        replay.run()
        runs[backend] = (sum(r.preemptions for r in decode), max(most), replay.log.completed)
    assert runs["trtllm"] == (0, 4, 24)
    assert runs["vllm"][0] > 0 and runs["vllm"][1] > 4 and runs["vllm"][2] == 24


def test_a_prompt_cached_whole_is_reused_whole_and_its_first_token_is_a_decode():
    """TensorRT-LLM reuses every cached block of a prompt, the last token's included (vLLM stops one token short),
    and with nothing to prefill the pass that samples the first token is a decode step (AISimulate's a5 run:
    prompt 1,024 cached whole, reuse 1,024, TTFT 10 ms against the prefill's 50; docs/reference-runs)."""
    trt, vllm = trt_rank(16), make_rank(16)
    for rank, engine in ((trt, TRTLLM), (vllm, VLLM)):
        rank.waiting.append(make_request(0, 8, 2, source=7))
        run(engine, rank)
        rank.waiting.append(make_request(1, 8, 2, source=7))
    batch = TRTLLM.schedule(trt, 100 * MS)
    (request, new), = batch.items
    assert (new, request.first_reused_tokens, request.committed_prefill) == (1, 8, 0)
    assert (batch.work.decode_requests, batch.work.prefill_chunks) == (1, ())
    assert TIMING(batch.work) == 1 * MS
    batch = VLLM.schedule(vllm, 100 * MS)
    (request, new), = batch.items
    assert (new, request.first_reused_tokens) == (4, 4) and TIMING(batch.work) == 10 * MS


def test_a_decode_reservation_counts_every_whole_footprint():
    """A decode rank of 20 blocks of 4 holds A (32 + 8 tokens: 8 prompt blocks held, 10 to completion).  B shares
    A's 32-token prefix (8 blocks A holds) and has 36 + 8 tokens: 11 blocks to completion, its prompt needs 1 block
    more.  Admission's no-evict counts A's 8 blocks once: B needs 3 + A's 2 outstanding = 5 of the 12 free.  A
    decode reservation counts both whole footprints, the shared prefix in each: 10 + 11 = 21 > 20 blocks, so B
    waits (the reservation asks for more than G1 has); with 21 blocks it takes its 1 block (AISimulate's decode
    worker, facts section 67)."""
    for blocks, expected in ((20, 21), (21, 1)):
        rank = trt_rank(blocks)
        a, b = make_request(0, 32, 8), make_request(1, 36, 8, source=10)
        a.stop_after = b.stop_after = 8
        a.blocks = rank.pool.allocate(8)
        rank.running.append(a)
        hits = list(a.blocks)
        need = rank.blocks_for(36) - len(hits)
        assert (to_completion(rank, a), to_completion(rank, b), need, rank.pool.free_count) == (10, 11, 1, blocks - 8)
        assert no_evict(rank, b, hits, need) == 5
        assert whole_footprints(rank, b, hits, need) == expected


def test_under_mtp_tensorrt_llm_keeps_the_last_hit_that_vllm_drops():
    """vLLM's drafter recomputes the last matched block under speculation (the mocker's `apply_prefix_recompute`
    with MTP), TensorRT-LLM's whole-sequence reuse does not: a 16-token prompt sharing 12 cached tokens (3 blocks of
    4) with a finished request reuses 12 on TensorRT-LLM and 8 on vLLM.  AISimulate, held-out h06 (facts section
    70, DeepSeek-V3 `nextn: 2`, block 32): second turns reuse 1,632 of 3,150 tokens (51 blocks of the first turn's
    1,500 + 150), kvreplay reused 1,600 before."""
    plan = SimpleNamespace(kind="mtp", draft_tokens=2, rates=(), mean_accepted=1.0, seed=42, draft_layers=1,
                           drafts_read_kv=True)
    trt, vllm = trt_rank(16), make_rank(16)
    for rank, engine in ((trt, TRTLLM), (vllm, VLLM)):
        rank.speculation = Speculation(plan)
        rank.waiting.append(make_request(0, 12, 2, source=7))
        run(engine, rank)
        rank.waiting.append(make_request(1, 16, 2, source=7))
    for rank, engine, reused in ((trt, TRTLLM, 12), (vllm, VLLM, 8)):
        (request, new), = engine.schedule(rank, 100 * MS).items
        assert (request.first_reused_tokens, new) == (reused, 16 - reused)


def _kv_config(backend: str, kv_cache: str) -> str:
    return (f"engine: {{model: Qwen/Qwen3-8B, hardware: h200_sxm, backend: {backend}, workers: {{aggregated: "
            f"{{kv_cache: {kv_cache}}}}}}}\n" + TRAFFIC)


@pytest.mark.parametrize("backend, block_size, rejected", [("trtllm", 1, True), ("trtllm", 2, False),
                                                           ("vllm", 1, True), ("sglang", 1, False)])
def test_tensorrt_llm_needs_two_tokens_per_block_as_vllm_does(backend, block_size, rejected):
    """The spec's `block_size` row: "vLLM and TensorRT-LLM require at least 2" (SGLang's page may be 1)."""
    result = compile_yaml(_kv_config(backend, f"{{block_size: {block_size}, capacity: {{type: fixed, blocks: 4096}}}}"))
    assert ("G1-BLOCK-SIZE-MIN" in codes(result)) is rejected and result.ok is not rejected


@pytest.mark.parametrize("backend", ["trtllm", "sglang"])
def test_g2_and_kvcr_are_rejected_with_tensorrt_llm_and_sglang(backend):
    """The spec's G2 "Supported": rejected with SGLang and TensorRT-LLM; KVCR: "Everything G2 rejects is rejected too,
    including SGLang and TensorRT-LLM" (KVCR needs a host_offload, which the backend refuses)."""
    g2 = compile_yaml(_kv_config(backend, "{block_size: 32, capacity: {type: fixed, blocks: 4096}, "
                                          "host_offload: {num_host_blocks: 64}}"))
    kvcr = compile_yaml(_kv_config(backend, "{block_size: 32, capacity: {type: fixed, blocks: 4096}, "
                                            "host_offload: {num_host_blocks: 64}, kvcr: {}}"))
    assert not g2.ok and codes(g2) == {"G2-BACKEND"}
    assert not kvcr.ok and "G2-BACKEND" in codes(kvcr)
    vllm = compile_yaml(_kv_config("vllm", "{block_size: 32, capacity: {type: fixed, blocks: 4096}, "
                                           "host_offload: {num_host_blocks: 64}, kvcr: {}}"))
    assert vllm.ok, vllm.diagnostics
