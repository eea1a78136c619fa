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

