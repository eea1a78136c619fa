"""The one-pass miss-ratio curve (issue 17 item 3) equals a plain LRU prefix cache simulated at each capacity."""
from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings, strategies as st

from kvreplay.runtime.analysis import belady_bound, block_stream, mrc
from kvreplay.runtime.serving.requests import Content, RequestSpec
from kvreplay.runtime.tiers.belady import BeladyPool


def spec(index: int, prompt: int, ids: list[int], output: int = 0, block: int = 4) -> RequestSpec:
    return RequestSpec(index, prompt, output, Content(hash_ids=tuple(ids), trace_block=block))


def plain_lru(specs, block_size: int, capacity: int) -> int:
    """Hit tokens of an LRU cache of `capacity` blocks: a request hits its longest resident run of lookup keys,
    then accesses all its keys last block first (so its first block is the newest)."""
    cache: OrderedDict = OrderedDict()
    hit = 0
    for s in specs:
        keys = s.keys(block_size)
        limit = max(0, (s.prompt_len - 1) // block_size)
        run = 0
        while run < min(limit, len(keys)) and keys[run] in cache:
            run += 1
        hit += run * block_size
        for key in reversed(keys):
            cache[key] = None
            cache.move_to_end(key)
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hit


HAND = [spec(0, 12, [1, 2, 3]), spec(1, 9, [1, 2, 4]), spec(2, 13, [5, 6, 7, 8]), spec(3, 12, [1, 2, 3])]


def test_a_hand_computed_curve():
    # R1 finds 1 and 2 at depths 1, 2; R3 finds 1 at depth 4 and 2 at depth 5 (R2's three blocks came between)
    curve = mrc.curve(block_stream.from_specs(HAND, 4))
    assert [curve.hit_tokens(c) for c in range(7)] == [0, 4, 8, 8, 12, 16, 16]
    assert curve.saturation == 5 and curve.prompt_tokens == 46 and curve.lookup_tokens == 4 * (2 + 2 + 3 + 2)
    assert curve.steps().tolist() == [1, 2, 4, 5]
    assert curve.summary()["points"] == [[1, 4, round(4 / 46, 6)], [2, 8, round(8 / 46, 6)],
                                         [4, 12, round(12 / 46, 6)], [5, 16, round(16 / 46, 6)]]
    assert [plain_lru(HAND, 4, c) for c in range(7)] == [curve.hit_tokens(c) for c in range(7)]


def test_trace_keys_from_numpy_equal_the_replays():
    s = RequestSpec(7, 1500, 700, Content(hash_ids=(9, 4, 11), trace_block=512))
    mask = (1 << 64) - 1
    assert block_stream.spec_keys(s, 16).tolist() == [k & mask for k in s.keys(16)]
    odd = RequestSpec(8, 1500, 70, Content(hash_ids=(9, 4, 11), trace_block=500))  # the generic path
    assert block_stream.spec_keys(odd, 16).tolist() == [k & mask for k in odd.keys(16)]


def test_synthetic_sessions_equal_lru_at_several_capacities():
    # turns of one session share their growing prefix, output included (segments of one source)
    specs = []
    for i in range(30):
        session, turn = i % 4, i // 4
        segments = ((100 + session, 0, 40 + 24 * turn), (500 + i, 0, 9))
        specs.append(RequestSpec(i, 40 + 24 * turn, 9, Content(segments=segments)))
    curve = mrc.curve(block_stream.from_specs(specs, 8))
    for capacity in (1, 3, 8, 17, 40, 90, 1000):
        assert curve.hit_tokens(capacity) == plain_lru(specs, 8, capacity), capacity
    # unbounded: turn t >= 1 reuses turn t-1's whole prompt blocks, (40 + 24 (t-1)) // 8 = 3t + 2 of them
    # (the block where the output starts is the turn's own); sessions 0, 1 have turns 1..7, sessions 2, 3 1..6
    assert curve.hit_tokens(10_000) == 8 * (2 * sum(3 * t + 2 for t in range(1, 8)) +
                                            2 * sum(3 * t + 2 for t in range(1, 7))) == 2768


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.lists(st.integers(0, 6), min_size=1, max_size=8),
                          st.integers(0, 9)), min_size=1, max_size=25),
       st.sampled_from([1, 2, 4]), st.lists(st.integers(0, 60), min_size=1, max_size=5))
def test_equals_lru_on_any_stream(rows, block, capacities):
    specs = []
    for i, (prompt, ids, output) in enumerate(rows):
        chain = [ids[0]]
        for h in ids[1:]:
            chain.append(chain[-1] * 7 + h + 1)  # prefix-chained ids, as a Mooncake trace's
        need = -(-prompt // block)
        specs.append(spec(i, prompt, (chain * need)[:need] if len(chain) < need else chain[:need], output, block))
    curve = mrc.curve(block_stream.from_specs(specs, block))
    for capacity in capacities:
        assert curve.hit_tokens(capacity) == plain_lru(specs, block, capacity)


def test_belady_bound_on_the_hand_stream():
    # at 4 blocks R2 needs 3: the fresh one, then key 3 (all of 1, 2, 3 are next used by R3; 3 was freed first)
    # and key 2, so R3 finds 1 only; at 5 only key 3 goes
    stream = block_stream.from_specs(HAND, 4)
    assert [int(belady_bound.prefix_hits(stream, c).sum()) * 4 for c in range(1, 6)] == [4, 8, 8, 12, 16]
    assert belady_bound.prefix_hits(stream, 4).tolist() == [0, 2, 0, 1]


def pool_prefix_hits(items: list[tuple[list, int]], capacity: int) -> list[int]:
    """The bound as tiers/belady.py's BeladyPool gives it, one request at a time (what the arrays must equal)."""
    uses: dict = {}
    for position, (keys, _) in enumerate(items):
        for key in dict.fromkeys(keys):
            uses.setdefault(key, []).append(position)
    pool = BeladyPool(capacity, uses)
    out = []
    for position, (keys, limit) in enumerate(items):
        pool.advance(position)
        hits = pool.match(keys, limit)
        pool.touch(hits)
        take = max(len(hits), min(len(keys), capacity))
        blocks = hits + pool.allocate(take - len(hits))
        pool.register_run(blocks, keys, len(hits), take)
        pool.release(blocks)
        out.append(len(hits))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10), st.lists(st.integers(0, 12), max_size=3),
                          st.integers(0, 10)), min_size=1, max_size=25), st.integers(1, 15))
def test_the_array_bound_equals_the_pool_on_any_stream(rows, capacity):
    # prompts of a few shared prefixes (prefix p's block j is key 100 p + j) with a few keys of their own; ties
    # (keys next used by the same request) and stale next uses are where the two could differ
    items = []
    for prefix, length, own, limit in rows:
        keys = list(dict.fromkeys([100 * prefix + j for j in range(length)] + [1000 + k for k in own]))
        items.append((keys, min(limit, len(keys))))
    stream = block_stream.from_key_arrays([block_stream.key_array(k) for k, _ in items], [n for _, n in items], 4)
    assert belady_bound.prefix_hits(stream, capacity).tolist() == pool_prefix_hits(items, capacity)


def test_a_stream_too_long_for_the_packed_order_gets_the_same_victims(monkeypatch):
    # (no stamp fits in 0 bits: every choice takes the lexsort path)
    items = [([100 * (i % 3) + j for j in range(2 + i % 5)] + [1000 + i % 4], 1 + i % 4) for i in range(30)]
    stream = block_stream.from_key_arrays([block_stream.key_array(k) for k, _ in items], [n for _, n in items], 4)
    packed = [belady_bound.prefix_hits(stream, c).tolist() for c in (2, 5, 9)]
    monkeypatch.setattr(belady_bound, "STAMP_BITS", 0)
    assert [belady_bound.prefix_hits(stream, c).tolist() for c in (2, 5, 9)] == packed == \
        [pool_prefix_hits(items, c) for c in (2, 5, 9)]
