"""The radix cache's run steps: whole nodes compared as one tuple, a spec's runs cut by bisection, and an insert
that starts at its lease's locked node touching the path exactly as a walk from the root (tiers/radix_cache.py,
tiers/token_runs.py)."""
from __future__ import annotations

from kvreplay.runtime.serving.requests import Content, RequestSpec
from kvreplay.runtime.tiers.radix_cache import RadixCache
from kvreplay.runtime.tiers.token_runs import OPEN_END, common, cut, shared, spec_cut, spec_runs


def spec(index: int, segments, output: int = 0) -> RequestSpec:
    prompt = sum(stop - start for _, start, stop in segments)
    out = ((1000 + index, 0, output),) if output else ()
    return RequestSpec(index, prompt, output, Content(segments=tuple(segments) + out), arrival_ns=0)


BLOCKS = (("h", 0, 512), ("h2", 0, 512), ("h3", 0, 300))


def test_a_node_whose_runs_the_prompt_repeats_is_passed_whole():
    """A node of three trace blocks (1,324 tokens) against a prompt that repeats them and goes on: all 1,324
    shared, and the prompt's rest starts after them; when the prompt's third run is longer than the node's, the
    rest starts inside it (at 300)."""
    prompt = BLOCKS + (("h4", 0, 512),)
    assert shared(BLOCKS, 1324, prompt, 1324) == (1324, (("h4", 0, 512),))
    longer = BLOCKS[:2] + (("h3", 0, 512), ("h4", 0, 512))
    assert shared(BLOCKS, 1324, longer, 1324) == (1324, (("h3", 300, 512), ("h4", 0, 512)))
    assert shared(BLOCKS, 1324, prompt, 1000) == (1000, None)  # (a cap inside the node: the caller splits)


def test_other_cases_fall_back_to_the_token_walk():
    """A prompt that leaves the node in its second block shares 512 + 88; the same tokens segmented otherwise (the
    first block as two runs) are still all shared, as `common` counts them; a prompt shorter than the node's last
    run shares what it has."""
    diverging = (("h", 0, 512), ("h2", 0, 88), ("x", 0, 512))
    assert shared(BLOCKS, 1324, diverging, 1324) == (600, None) == (common(BLOCKS, diverging, 1324), None)
    split = (("h", 0, 200), ("h", 200, 512)) + BLOCKS[1:]
    assert shared(BLOCKS, 1324, split, 1324) == (1324, None)
    short = BLOCKS[:2] + (("h3", 0, 100),)
    assert shared(BLOCKS, 1324, short, 1324) == (1124, None)


def test_cutting_a_specs_runs_by_bisection_equals_the_walk():
    """Every range of a 4-run spec (1,244 prompt + 20 output tokens, in steps of 7 and the runs' ends) is cut
    alike by `spec_cut` and `cut`."""
    s = spec(0, [(1, 0, 512), (2, 0, 512), (3, 0, 220)], output=20)
    runs = spec_runs(s)
    assert sum(b - a for _, a, b in runs) == 1264
    points = sorted(set(range(0, 1265, 7)) | {511, 512, 513, 1024, 1244, 1264})
    for start in points:
        for stop in points + [OPEN_END]:
            if stop >= start:
                assert spec_cut(s, start, stop) == cut(runs, start, stop), (start, stop)


def _two_sessions(start_at_lease: bool):
    """x (100 + 50 tokens) is cached; y shares x's first 100, is admitted (its match splits x's node: H) and then
    inserts its prompt and 10 output tokens, from its lease's node H or from the root."""
    pool = RadixCache(10_000)
    x = spec(0, [(1, 0, 100), (2, 0, 50)])
    y = spec(1, [(1, 0, 100), (3, 0, 50)], output=10)
    pool.insert(x, 150)
    head, cached = pool.match(y, 149)
    pool.lock(head)
    held, leaf = pool.insert(y, 160, head if start_at_lease else None)
    (tail,) = [n for n in head.children.values() if n is not leaf]
    return pool, head, tail, leaf, (cached, held)


def test_an_insert_from_its_lease_touches_the_path_as_a_walk_from_the_root():
    """x's node was tick 1, the split's head took serial 2 and tick 3 (y's match), y's insert touches the head
    (tick 4) and creates y's leaf (tick 5) in both; eviction then takes x's 50-token tail first, then y's leaf's
    last 10 tokens."""
    for start_at_lease in (True, False):
        pool, head, tail, leaf, counts = _two_sessions(start_at_lease)
        assert counts == (100, 100)
        assert (head.tick, head.serial, tail.tick, leaf.tick, leaf.length) == (4, 2, 1, 5, 60)
        assert pool.evict(50) == 50 and tail.parent is None
        assert pool.evict(10) == 10 and leaf.length == 50 and pool.tree_tokens == 150


def test_a_deep_lease_touches_each_ancestor_top_down():
    """A path of three nodes (100 / 50 / 50 tokens, made by two splits) ends at a lease's locked node; an insert
    from it touches them in root-to-leaf order, each one tick after its parent, then adds one 30-token leaf."""
    pool = RadixCache(10_000)
    pool.insert(spec(0, [(1, 0, 200)]), 200)
    pool.match(spec(1, [(1, 0, 100), (9, 0, 5)]), 104)
    pool.match(spec(2, [(1, 0, 150), (9, 0, 5)]), 154)
    deep, cached = pool.match(spec(3, [(1, 0, 200), (9, 0, 5)]), 204)
    pool.lock(deep)
    assert cached == 200 and (deep.length, deep.parent.length, deep.parent.parent.length) == (50, 50, 100)
    before = pool.ticks
    held, leaf = pool.insert(spec(4, [(1, 0, 200), (8, 0, 30)]), 230, deep)
    assert held == 200 and leaf.parent is deep and leaf.length == 30
    assert (deep.parent.parent.tick, deep.parent.tick, deep.tick, leaf.tick) == tuple(before + k for k in (1, 2, 3, 4))
