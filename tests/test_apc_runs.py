"""APC and the KVC chain at the scale of prefixes: a waiting request's kept lookup (runtime/tiers/apc_retry.py), a
store into a closed tier counted without a pass over the prefix (closed_tier.py), and a finished request's forgotten
keys; each answer must be the one a fresh computation gives."""
from __future__ import annotations

from kvreplay.runtime.serving.requests import Content, RequestSpec
from kvreplay.runtime.shell.clock import Clock
from kvreplay.runtime.tiers.apc import ApcPool
from kvreplay.runtime.tiers.kvc import store, write_through

from .test_kvc_tiers import CHUNK_BYTES, chain_of_one_rank, tier

TTL = 100


def idle_prefix() -> tuple[ApcPool, Clock, list[int]]:
    """A pool of 8 blocks with a TTL of 100 ns, holding the idle prefix 10, 11, 12 in blocks 0-2."""
    clock = Clock()
    apc = ApcPool(8, clock, TTL)
    blocks = apc.allocate(3)
    apc.register_run(blocks, [10, 11, 12], 0, 3, "A")
    apc.release(blocks)
    return apc, clock, blocks


def test_a_kept_lookup_still_refreshes_its_idle_blocks():
    apc, clock, blocks = idle_prefix()
    keys = [10, 11, 12, 13]
    clock.now = 5
    assert apc.match(keys, 4) == blocks
    assert apc.free_among(apc.match(keys, 4)) == 0  # just refreshed: protected
    clock.now = 60
    assert apc.match(keys, 4) == blocks  # the retry: refreshed at 60, so protected until 160
    clock.now = 159
    assert apc.protected_count == 3 and apc.free_count == 5
    clock.now = 160
    assert apc.protected_count == 0 and apc.free_count == 8


def test_a_kept_lookup_is_dropped_when_the_next_key_is_cached_or_its_blocks_are_touched():
    apc, clock, blocks = idle_prefix()
    keys = [10, 11, 12, 13, 14]
    clock.now = 5
    assert apc.match(keys, 5) == blocks
    fourth = apc.allocate(1)
    apc.register_run(fourth, [13], 0, 1, "B")  # the key after the prefix is cached now: the prefix grows
    clock.now = 6
    assert apc.match(keys, 5) == blocks + fourth
    apc.release(fourth)
    assert apc.match(keys, 5) == blocks + fourth and apc.idle_count == 4
    apc.touch(blocks[:2])  # another request holds the first two: blocks 2 and 3 stay idle
    clock.now = 7
    hits = apc.match(keys, 5)
    assert apc.free_among(list(hits)) == 0 and apc.idle_count == 2 and apc.pinned_count == 2
    clock.now = 7 + TTL  # only what the lookup at 7 refreshed was protected: the two idle blocks expire now
    assert apc.free_count == 6


def test_a_kept_lookup_ends_with_its_ttl_window():
    apc, clock, blocks = idle_prefix()
    keys = [10, 11, 12, 13]
    clock.now = 5
    assert apc.match(keys, 4) == blocks
    clock.now = 5 + TTL  # the refresh at 5 has expired: the monitor may evict the oldest, block 2 (tail first)
    assert apc.evict(1) == 1
    assert apc.match(keys, 4) == blocks[:2]
    # the same answer as a pool that never kept a lookup
    assert apc.free_among(list(blocks[:2])) == 0 and apc.free_count == 6


def spec(index: int, segments) -> RequestSpec:
    return RequestSpec(index, sum(stop - start for _, start, stop in segments), 0, Content(segments=segments))


def test_a_full_tier_that_never_evicts_counts_what_each_store_lacks():
    # CPUMemory holds 2 chunks of 4 tokens; a's 4 prompt chunks fill it (chunks 0-1) and the other 2 are dropped
    rank = chain_of_one_rank([tier("CPUMemory", 2, chunk_bytes=CHUNK_BYTES)], chunk_size=4)
    chain, cpu = rank.chain, rank.chain.tiers[0]
    a = spec(0, ((0, 0, 16),))
    keys = chain.keys(a)
    store(rank, keys, source=(a, "prompt", len(keys)))
    assert cpu.resident == 2 and chain.counters.dropped_chunks == 2 and len(rank.jobs) == 1
    # b shares a's first chunk (the same 4 tokens), then 8 tokens of its own: its blocks 2, 1, 0 leave one by one
    b = spec(1, ((0, 0, 4), (1, 0, 8)))
    write_through(rank, ["b2"], [(b, [2])])  # prefix of 3 chunks, the first held: 2 lacking, no room
    assert chain.counters.dropped_chunks == 4 and cpu.last_reserve_short
    write_through(rank, ["b1"], [(b, [1])])  # 2 chunks: 1 lacking
    assert chain.counters.dropped_chunks == 5
    cpu.last_reserve_short = False
    write_through(rank, ["b0"], [(b, [0])])  # 1 chunk, held: nothing is offered
    assert chain.counters.dropped_chunks == 5 and not cpu.last_reserve_short
    assert chain.counters.write_through_stores == 3 and len(rank.jobs) == 1 and cpu.resident == 2


def test_a_forgotten_writer_is_stored_from_keys_made_again_and_not_kept():
    rank = chain_of_one_rank([tier("CPUMemory", 10, chunk_bytes=CHUNK_BYTES)], chunk_size=4)
    a = spec(0, ((0, 0, 12),))
    expected = a.keys(4)
    a.forget_keys()
    write_through(rank, ["a2"], [(a, [2])])  # its whole prompt: 3 chunks, copied in
    (copy,) = rank.jobs
    assert copy.keys == expected and rank.chain.tiers[0].resident == 3
    assert a._keys == {}  # (made for the store, not memoised again)


def trace_spec(index: int, hash_ids, prompt_len: int, output_len: int) -> RequestSpec:
    return RequestSpec(index, prompt_len, output_len, Content(hash_ids=tuple(hash_ids), trace_block=8))


def test_a_trace_writers_write_through_is_counted_from_its_prompt_store_and_its_output_keys():
    # b: trace ids 0, 1, 2 of 8 tokens; 22 prompt tokens (5 full chunks of 4, keys 0-4, then a partial one) and 8
    # output tokens (blocks 5, 6: negative keys, b's own)
    b = trace_spec(1, (0, 1, 2), 22, 8)
    chunks = b.keys(4)
    assert chunks[:5] == [0, 1, 2, 3, 4] and all(key < 0 for key in chunks[5:]) and len(chunks) == 7
    dropped = []
    for prompt_stored in (True, False):
        # CPUMemory holds 3 chunks of 4 tokens: keys 0, 1 and b's last output key fill it
        rank = chain_of_one_rank([tier("CPUMemory", 3, chunk_bytes=CHUNK_BYTES)], chunk_size=4)
        chain, cpu = rank.chain, rank.chain.tiers[0]
        store(rank, [0, 1, chunks[6]])
        b = trace_spec(1, (0, 1, 2), 22, 8)
        if prompt_stored:  # its retirement: 6 keys, 0 and 1 held
            prompt = chain.keys(b)
            store(rank, prompt, source=(b, "prompt", len(prompt)))
        b.forget_keys()
        counts = [chain.counters.dropped_chunks]
        write_through(rank, ["b4"], [(b, [4])])  # 5 chunks, all the prompt's: 3 lacking
        counts.append(chain.counters.dropped_chunks)
        assert b._keys == {} and ((id(cpu), id(b), 4) in chain.closed.found) is not prompt_stored
        write_through(rank, ["b6"], [(b, [6])])  # 7 chunks: 0, 1 and the last output key held, 4 lacking
        counts.append(chain.counters.dropped_chunks)
        dropped.append(counts)
    # with the prompt's store first (its own 4 lacking counted, then no key list made for the first write-through),
    # and without it (each counted on b's chunk list): the same counts of what each store lacks
    assert dropped == [[4, 7, 11], [0, 3, 7]]
