"""G1's pool of runs (g1_runs.RunPool) against the per-block reference (g1.BlockPool), by property.

The rule (issue 20, facts §64): only the representation changes.  Hypothesis draws operation sequences
(admissions with prefix hits, chunked registrations, decode blocks with output keys, releases) over chains of
keys that share prefixes and tails; both pools run each one, with and without KV events and kept copies, and
must hand out the same blocks, evict the same keys (the same events), keep the same free queue and the same
per-block state after every step.  Any other representation of the pool (arrays, ranges of ids: facts §56,
§64) is to be held to the same sequences, on each of its paths (a subclass forcing one path joins `KINDS`).
"""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.tiers.g1_extents import ExtentPool
from kvreplay.runtime.tiers.g1_runs import RunPool

from .test_g1_runs import admit_both, state

KINDS = [RunPool]


# chains of keys: two share a prefix, one shares another's tail, one runs backwards across a gap
CHAINS = [list(range(100, 140)), list(range(100, 120)) + list(range(300, 320)),
          list(range(500, 520)) + list(range(110, 130)), list(range(999, 960, -1)) + [5, 7, 9]]

STEP = st.tuples(st.sampled_from(["admit", "admit", "decode", "release"]), st.integers(0, 10 ** 6),
                 st.integers(0, 10 ** 6), st.integers(0, 10 ** 6))


def run(kind, capacity: int, steps, events: bool, copies: bool, caching: bool) -> None:
    plain, pool = BlockPool(capacity, caching), kind(capacity, caching)
    for each in (plain, pool):
        if copies:
            each.keep_copies()
        if events:
            each.events = []
    live: list[list[int]] = []
    output_key = -1
    for op, a, b, c in steps:
        if op == "release" and live:
            blocks = live.pop(a % len(live))
            if b % 3 == 0:  # a G2 copy still reads them: their next owner must wait for it
                plain.freeing_while_copied(blocks)
                pool.freeing_while_copied(blocks)
            plain.release(blocks)
            pool.release(blocks)
        elif op == "decode" and live and plain.free_count:
            blocks = live[a % len(live)]
            new = plain.allocate(1)
            assert pool.allocate(1) == new
            blocks.extend(new)
            if b % 2 and caching:  # the block filled: an output key (negative, never a prompt's)
                plain.register_run(blocks, [output_key] * len(blocks), len(blocks) - 1, len(blocks))
                pool.register_run(blocks, [output_key] * len(blocks), len(blocks) - 1, len(blocks))
                output_key -= 1
        elif op == "admit":
            chain = CHAINS[a % len(CHAINS)]
            keys = chain[:1 + b % len(chain)]
            hits = plain.match(keys, len(keys) - 1)
            assert pool.match(keys, len(keys) - 1) == hits
            if copies:
                hits = hits[:c % (len(hits) + 1)]  # a state cache resumes earlier: cached blocks computed again
            need = len(keys) - len(hits) + c % 3  # (+ a partial block, a decode's)
            blocks = admit_both(plain, pool, hits, need)
            if blocks is None:
                continue
            stop = min(len(keys), len(blocks))
            middle = len(hits) + (stop - len(hits)) * (c % 4) // 4  # two prefill chunks
            for start, end in ((len(hits), middle), (middle, stop)):
                plain.register_run(blocks, keys, start, end)
                pool.register_run(blocks, keys, start, end)
            live.append(blocks)
        if a % 5 == 0 and plain.copying:  # a copy finishes
            ended = sorted(plain.copying)[: 1 + b % len(plain.copying)]
            plain.end_copy(ended)
            pool.end_copy(ended)
        assert state(pool) == state(plain)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(KINDS), st.integers(8, 90), st.lists(STEP, max_size=80),
       st.booleans(), st.booleans())
def test_run_pool_is_the_block_pool_under_random_operations(kind, capacity, steps, events, copies):
    run(kind, capacity, steps, events, copies, caching=True)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(KINDS), st.integers(8, 90), st.lists(STEP, max_size=60))
def test_run_pool_is_the_block_pool_without_prefix_caching(kind, capacity, steps):
    run(kind, capacity, steps, events=False, copies=False, caching=False)



def run_extents(capacity: int, steps, events: bool, copies: bool, caching: bool) -> None:
    """The same sequences on g1_extents.ExtentPool against RunPool.  ExtentPool names blocks its own way (a
    request's next blocks are the ids after its last one: `allocate_after`), so its ids are mapped to RunPool's as
    each is handed out, and every answer, the cached map, the copies and the events are compared through that map
    after every step.  Each request's output keys run down from its own base (as a trace's do), with gaps where a
    filled block is not registered; a chunk grows a request by blocks whose keys may be cached already."""
    plain, pool = RunPool(capacity, caching), ExtentPool(capacity, caching)
    for each in (plain, pool):
        if copies:
            each.keep_copies()
        if events:
            each.events = []
    named: dict[int, int] = {}  # ExtentPool's id -> RunPool's block (ids are never reused there)
    live: list[list] = []  # [RunPool's blocks, ExtentPool's ids, keys, the next output key]
    for op, a, b, c in steps:
        if op == "release" and live:
            blocks, ids, _, _ = live.pop(a % len(live))
            plain.release(blocks)
            pool.release(ids)
        elif op == "decode" and live and plain.free_count:
            entry = live[a % len(live)]
            blocks, ids, keys = entry[:3]
            new, fresh = plain.allocate(1), pool.allocate_after(ids[-1])
            named.update(zip(fresh, new))
            blocks.extend(new)
            ids.extend(fresh)
            keys.append(entry[3])
            entry[3] -= 1
            if b % 3 and caching:  # the block filled: its output key (else a gap in the request's keys)
                plain.register_run(blocks, keys, len(blocks) - 1, len(blocks))
                pool.register_run(ids, keys, len(ids) - 1, len(ids))
        elif op == "chunk" and live and caching:
            blocks, ids, keys, _ = live[a % len(live)]
            need = 1 + c % 5
            if not plain.can_allocate(need):
                assert not pool.can_allocate(need)
                continue
            new, fresh = plain.allocate(need), pool.allocate_after(ids[-1], need)
            named.update(zip(fresh, new))
            blocks.extend(new)
            ids.extend(fresh)
            first = 100 + b % 60
            keys.extend(range(first, first + need))  # (may be cached: each keeps its block, or a copy)
            plain.register_run(blocks, keys, len(blocks) - need, len(blocks))
            pool.register_run(ids, keys, len(ids) - need, len(ids))
        elif op == "admit":
            chain = CHAINS[a % len(CHAINS)]
            keys = chain[:1 + b % len(chain)]
            hits, found = plain.match(keys, len(keys) - 1), pool.match(keys, len(keys) - 1)
            assert [named[i] for i in found] == hits
            if copies:
                hits, found = hits[:c % (len(hits) + 1)], found[:c % (len(hits) + 1)]
            need = len(keys) - len(hits) + c % 3
            assert pool.free_among(found) == plain.free_among(hits)
            if not plain.can_allocate(need, hits):
                assert not pool.can_allocate(need, found)
                continue
            plain.touch(hits)
            pool.touch(found)
            new, fresh = plain.allocate(need), pool.allocate(need)
            named.update(zip(fresh, new))
            blocks, ids = hits + new, found + fresh
            stop = min(len(keys), len(blocks))
            middle = len(hits) + (stop - len(hits)) * (c % 4) // 4
            for start, end in ((len(hits), middle), (middle, stop)):
                plain.register_run(blocks, keys, start, end)
                pool.register_run(ids, keys, start, end)
            output = -1000 * (len(live) + a % 7 + 1)  # (the partial blocks' keys are the request's output keys)
            live.append([blocks, ids, keys[:stop] + list(range(output, output - (len(blocks) - stop), -1)),
                         output - (len(blocks) - stop)])
        assert (pool.free_count, pool.evictions, pool.events) == (plain.free_count, plain.evictions, plain.events)
        assert sorted((key, named[i]) for key, i in pool.cached.items()) == sorted(plain.cached.items())
        assert len(pool.cached) == len(plain.cached)
        assert {key: [named[i] for i in ids] for key, ids in (pool.copies or {}).items()} == (plain.copies or {})


EXTENT_STEP = st.tuples(st.sampled_from(["admit", "admit", "decode", "decode", "chunk", "release"]),
                        st.integers(0, 10 ** 6), st.integers(0, 10 ** 6), st.integers(0, 10 ** 6))


@settings(max_examples=400, deadline=None)
@given(st.integers(8, 90), st.lists(EXTENT_STEP, max_size=80), st.booleans(), st.booleans())
def test_extent_pool_is_the_run_pool_under_random_operations(capacity, steps, events, copies):
    run_extents(capacity, steps, events, copies, caching=True)


@settings(max_examples=40, deadline=None)
@given(st.integers(8, 90), st.lists(EXTENT_STEP, max_size=60))
def test_extent_pool_is_the_run_pool_without_prefix_caching(capacity, steps):
    run_extents(capacity, steps, events=False, copies=False, caching=False)
