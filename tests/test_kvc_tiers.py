"""opal's KV-cache tiers (CPUMemory -> LocalNVMe -> DistributedFS) behind G1, replayed from hand-built plans.

Each scenario is a few Mooncake rows (tests/scenarios.py: BS = 4 tokens per block and per hash id, fixed timing:
a pass with prefill 10 ms) on a plan whose tiers are set by hand, so every copy time below is arithmetic:
a chunk of 4 tokens at 250,000 bytes per token is 1 MB, which a 1 GB/s link moves in 1 ms."""
from __future__ import annotations

from dataclasses import replace

import pytest

from kvreplay.compiler.opal_records import KvcPlan, KvcTierPlan, OpalPlan, RouterPlan
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.plan_records import LinkPlan
from kvreplay.runtime.build import build
from kvreplay.runtime.outputs.metrics import request_record

from .scenarios import aggregated_config, compile_scenario, row

CHUNK_BYTES = 4 * 250_000
A, B = [1, 2, 3, 4], [5, 6, 7, 8]


def tier(name: str, chunks: int, gbps: float = 1.0, latency_ns: int = 1000, slots: int | None = None,
         shared: bool = False, eviction: str = "none", chunk_bytes: int = CHUNK_BYTES) -> KvcTierPlan:
    return KvcTierPlan(name, shared, chunks, chunk_bytes, LinkPlan(gbps, None, latency_ns, slots), eviction)


def run(tmp_path, rows, tiers, *, chunk_size: int = 4, partial: bool = True, g1_blocks: int = 5,
        caching: bool = True, extra: str = ""):
    config = aggregated_config({}, g1_blocks=g1_blocks, role_extra=extra,
                               parallelism="" if not extra else "")
    if not caching:
        config = config.replace("block_size: 4\n", "block_size: 4\n        prefix_caching: false\n")
    plan = finish_plan(compile_scenario(tmp_path, rows, config, "c.yaml"), tmp_path)
    kvc = KvcPlan(chunk_size, partial, tuple(tiers), LinkPlan(1.0, None, 1000, None))
    opal = OpalPlan((), None, kvc, RouterPlan("round_robin", False, 4, 0, 1, 10 ** 9), 42, None, 250_000, "m",
                    80.0, 1, 0, "{}")
    replay = build(replace(plan, opal=opal))
    replay.run()
    replay.close()
    return replay


def served(replay, index: int) -> tuple:
    return replay.requests[index].tier.served


def ttft(replay, index: int) -> float:
    return request_record(replay.requests[index])["ttft_ms"]


def test_a_retired_prompt_is_served_from_cpu_memory_and_the_spill_from_local_nvme(tmp_path):
    # CPUMemory holds 2 chunks: A's retirement puts chunks 1-2 there and 3-4 in LocalNVMe; B evicts A from G1
    rows = [row(0, 16, 2, A), row(100, 16, 2, B), row(200, 16, 2, A)]
    replay = run(tmp_path, rows, [tier("CPUMemory", 2), tier("LocalNVMe", 10, gbps=0.5, latency_ns=10_000)])
    assert served(replay, 0) == served(replay, 1) == ()
    # the last prompt token is computed: 3 blocks of 4, 8 tokens from CPUMemory and 4 from LocalNVMe
    assert served(replay, 2) == (("CPUMemory", 8), ("LocalNVMe", 4))
    # CPUMemory: 1 us + 2 MB at 1 GB/s; LocalNVMe: 10 us + 1 MB at 0.5 GB/s, then the GPU copy 1 us + 1 MB at 1 GB/s
    assert ttft(replay, 2) == pytest.approx(max(2.001, 2.010 + 1.001) + 10.0)
    cpu, nvme = replay.ranks()[0].chain.tiers
    assert (cpu.resident, nvme.resident) == (2, 6)  # A's spill (2) and B's (4): the first tier was full for B
    assert replay.ranks()[0].chain.counters.retirement_stores == 3


def test_what_no_tier_has_room_for_is_dropped(tmp_path):
    replay = run(tmp_path, [row(0, 16, 2, A), row(100, 16, 2, B)], [tier("CPUMemory", 3)])
    chain = replay.ranks()[0].chain
    assert chain.tiers[0].resident == 3
    assert chain.counters.dropped_chunks == 1 + 4  # A's fourth chunk, then all of B's


def test_apc_prefix_and_tier_continuation_are_served_together(tmp_path):
    # C shares A's first two blocks in G1 (still cached) and continues in CPUMemory with A's chunks 3-4
    rows = [row(0, 16, 2, A), row(100, 24, 2, [1, 2, 3, 4, 9, 10])]
    replay = run(tmp_path, rows, [tier("CPUMemory", 10)], g1_blocks=8)
    assert served(replay, 1) == ()  # G1 still holds all of A: nothing to ask the tier
    rows = [row(0, 16, 2, A), row(50, 16, 2, B), row(100, 20, 2, [1, 2, 3, 4, 11])]
    replay = run(tmp_path, rows, [tier("CPUMemory", 10)], g1_blocks=6)
    record = request_record(replay.requests[2])
    tiers = dict(served(replay, 2))
    assert record["reused_input_tokens"] == 16
    assert tiers["CPUMemory"] == 16 - record["admission_history"][0]["g1_reused_input_tokens"] > 0


def test_chunks_larger_than_blocks_and_the_trailing_partial_chunk(tmp_path):
    # chunk 8 = two blocks; an 18-token prompt has two full chunks and a partial one of 2 tokens
    rows = [row(0, 18, 2, [1, 2, 3, 4, 5]), row(100, 16, 2, B), row(200, 18, 2, [1, 2, 3, 4, 5])]
    replay = run(tmp_path, rows, [tier("CPUMemory", 10, chunk_bytes=2 * CHUNK_BYTES)], chunk_size=8, g1_blocks=5)
    assert replay.ranks()[0].chain.tiers[0].resident == 3 + 2  # A: 2 chunks + the partial one; B: 2 chunks
    assert served(replay, 2) == (("CPUMemory", 16),)  # 17 tokens may be reused: 4 whole blocks
    replay = run(tmp_path, rows, [tier("CPUMemory", 10, chunk_bytes=2 * CHUNK_BYTES)], chunk_size=8, partial=False,
                 g1_blocks=5)
    assert replay.ranks()[0].chain.tiers[0].resident == 2 + 2


def test_io_slots_make_reads_wait_first_come_first_served(tmp_path):
    # a 32-token request between evicts A and B from G1; then both come back at once
    rows = [row(0, 16, 2, A), row(0, 16, 2, B), row(100, 32, 2, list(range(21, 29))), row(200, 16, 2, A),
            row(200, 16, 2, B)]
    wide = run(tmp_path, rows, [tier("LocalNVMe", 20, slots=None)], g1_blocks=10)
    narrow = run(tmp_path, rows, [tier("LocalNVMe", 20, slots=1)], g1_blocks=10)
    assert served(narrow, 3) and served(narrow, 4)
    link = narrow.ranks()[0].chain.tiers[0].read
    assert wide.ranks()[0].chain.tiers[0].read.slot_wait_ns == 0
    assert link.slot_wait_ns > 0
    assert ttft(narrow, 4) > ttft(wide, 4)


def test_an_lru_tier_demotes_what_it_evicts_and_promotes_hits(tmp_path):
    rows = [row(0, 16, 2, A), row(100, 16, 2, B), row(200, 16, 2, A)]
    replay = run(tmp_path, rows, [tier("CPUMemory", 4, eviction="lru"), tier("LocalNVMe", 10)])
    chain = replay.ranks()[0].chain
    assert served(replay, 2) == (("LocalNVMe", 12),)  # B's retirement had demoted all of A
    assert chain.counters.promotions == 3  # the hit went back up into CPUMemory ...
    # ... demoting three of B's chunks, and A's retirement then brought its fourth chunk up, demoting one more
    assert chain.counters.demotions == 4 + 3 + 1
    cpu, nvme = chain.tiers
    assert (cpu.resident, nvme.resident) == (4, 8)
    assert chain.counters.dropped_chunks == 0


def test_with_apc_off_only_the_restoring_request_uses_its_restored_blocks(tmp_path):
    rows = [row(0, 16, 2, A), row(100, 16, 2, A), row(100, 16, 2, A)]
    replay = run(tmp_path, rows, [tier("CPUMemory", 10)], caching=False, g1_blocks=12)
    assert served(replay, 0) == ()
    assert served(replay, 1) == served(replay, 2) == (("CPUMemory", 12),)  # no G1 sharing between the two
    assert replay.ranks()[0].pool.own == {}  # every restored block was freed with its request


def test_distributed_fs_is_one_store_for_every_worker(tmp_path):
    rows = [row(0, 16, 2, A), row(100, 16, 2, A)]  # round robin: worker 0, then worker 1
    config = aggregated_config({}, g1_blocks=5, parallelism="replicas: 2")
    plan = finish_plan(compile_scenario(tmp_path, rows, config, "c.yaml"), tmp_path)
    # CPUMemory takes what it has room for and only the rest reaches the store: with two chunks of room, worker
    # 1 finds nothing (its own CPUMemory misses at the first chunk), so the store alone is listed here
    tiers = (tier("DistributedFS", 100, gbps=2.0, latency_ns=100_000, shared=True),)
    kvc = KvcPlan(4, True, tiers, LinkPlan(1.0, None, 1000, None))
    opal = OpalPlan((), None, kvc, RouterPlan("round_robin", False, 4, 0, 2, 10 ** 9), 42, None, 250_000, "m",
                    80.0, 1, 0, "{}")
    replay = build(replace(plan, opal=opal))
    replay.run()
    replay.close()
    first, second = (rank.chain for rank in replay.ranks())
    assert first.tiers[0] is second.tiers[0]
    assert served(replay, 1) == (("DistributedFS", 12),)
    # 100 us + 3 MB at 2 GB/s from the store, then 1 us + 3 MB at 1 GB/s onto the GPU, then the 10 ms prefill
    assert ttft(replay, 1) == pytest.approx(0.1 + 1.5 + 0.001 + 3.0 + 10.0)


def test_cpu_memory_is_one_pool_per_worker(tmp_path):
    rows = [row(0, 16, 2, A), row(100, 16, 2, A)]
    config = aggregated_config({}, g1_blocks=5, parallelism="replicas: 2")
    plan = finish_plan(compile_scenario(tmp_path, rows, config, "c.yaml"), tmp_path)
    kvc = KvcPlan(4, True, (tier("CPUMemory", 10),), LinkPlan(1.0, None, 1000, None))
    opal = OpalPlan((), None, kvc, RouterPlan("round_robin", False, 4, 0, 2, 10 ** 9), 42, None, 250_000, "m",
                    80.0, 1, 0, "{}")
    replay = build(replace(plan, opal=opal))
    replay.run()
    first, second = (rank.chain for rank in replay.ranks())
    assert first.tiers[0] is not second.tiers[0]
    assert served(replay, 1) == ()
    assert (first.tiers[0].resident, second.tiers[0].resident) == (4, 4)


def chain_of_one_rank(tiers, chunk_size: int):
    """A rank (just what the KVC chain reads) with its chain of `tiers`."""
    from types import SimpleNamespace

    from kvreplay.runtime.shell.clock import Clock
    from kvreplay.runtime.tiers.kvc_chain import attach_kvc

    rank = SimpleNamespace(index=0, worker=0, name="worker0.dp0", block_size=4, jobs=[])
    attach_kvc([rank], KvcPlan(chunk_size, True, tuple(tiers), LinkPlan(1.0, None, 1000, None)), Clock())
    return rank


def test_write_through_stores_only_up_to_the_largest_chunk_aligned_end_of_what_apc_evicted():
    from kvreplay.runtime.serving.requests import Content, RequestSpec
    from kvreplay.runtime.tiers.kvc import write_through

    rank = chain_of_one_rank([tier("CPUMemory", 10, chunk_bytes=2 * CHUNK_BYTES)], chunk_size=8)
    # 8 prompt tokens and 9 output tokens: blocks 0-1 are the prompt, 2-3 its first 8 output tokens
    a = RequestSpec(0, 8, 9, Content(segments=((0, 0, 8), (7, 0, 9))))
    b = RequestSpec(1, 8, 9, Content(segments=((1, 0, 8), (8, 0, 9))))
    # a's blocks 3 (ends at 16: a chunk boundary), 2 (12: none) and 1 (8: a boundary); b's block 2 only
    write_through(rank, ["k3", "k2", "k1", "b2"], [(a, [3, 2, 1]), (b, [2])])
    chain = rank.chain
    assert chain.counters.write_through_stores == 1  # b had no evicted block ending on a boundary
    (copy,) = rank.jobs
    assert copy.keys == a.keys(8)[:2]  # a's prefix up to 16 tokens: its prompt chunk and first output chunk
    assert chain.tiers[0].resident == 2
    write_through(rank, ["k1"], [(a, [1])])  # the prompt chunk is in the tier already: nothing is copied again
    assert chain.counters.write_through_stores == 2 and len(rank.jobs) == 1


def test_max_prefix_routing_counts_what_the_tiers_hold_past_g1():
    from kvreplay.runtime.serving.requests import Content, RequestSpec
    from kvreplay.runtime.tiers.kvc import store

    rank = chain_of_one_rank([tier("CPUMemory", 2), tier("LocalNVMe", 10)], chunk_size=4)
    spec = RequestSpec(0, 18, 1, Content(segments=((0, 0, 18), (9, 0, 1))))
    store(rank, rank.chain.keys(spec))  # 4 full chunks and the partial one: 2 in CPUMemory, 3 in LocalNVMe
    for tier_ in rank.chain.tiers:  # (held keys are ready once their copies land)
        tier_.landed(list(tier_.in_flight))
    assert rank.chain.held_beyond(rank, spec, 0) == 18
    assert rank.chain.held_beyond(rank, spec, 8) == 10  # past a G1 prefix of two blocks
    other = RequestSpec(1, 18, 1, Content(segments=((3, 0, 18), (9, 0, 1))))
    assert rank.chain.held_beyond(rank, other, 0) == 0
