"""APC's pool against a plain model of its rules, on random sequences of requests, releases, evictions and time steps.

The model (below) keeps the idle queue as a list of (block, last access) and the
free memory as a list, and applies spec/gpu-apc.md's rules one block at a time:
fresh blocks first in id order, then free ones first freed first, then idle ones
from the least recent end while outside their TTL window; a release enters a
request's blocks tail first; with a TTL a lookup's idle hits become the newest.
`ApcPool` does the same with columns and runs (apc.py, apc_queue.py,
apc_free.py); after every step both must agree on what was handed out, the queue,
the free memory, what counts as free, the cache, and every eviction's columns.
"""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kvreplay.runtime.shell.clock import Clock
from kvreplay.runtime.tiers.apc import ApcPool
from kvreplay.runtime.tiers.apc_writers import victims


class Model:
    def __init__(self, capacity: int, ttl: int):
        self.capacity, self.ttl, self.now, self.created = capacity, ttl, 0, 0
        self.ref, self.key_of, self.writer, self.index = {}, {}, {}, {}
        self.cached: dict = {}
        self.free: list[int] = []
        self.queue: list[list[int]] = []  # [block, last access], least recent first
        self.evicted: list = []

    def expired(self) -> list[int]:
        out = []
        for block, stamp in self.queue:  # (in access order: the first protected one ends the expired prefix)
            if stamp + self.ttl > self.now and self.ttl:
                break
            out.append(block)
        return out

    def free_count(self) -> int:
        return self.capacity - self.created + len(self.free) + len(self.expired())

    def free_among(self, blocks) -> int:
        expired = set(self.expired())
        return sum(1 for b in blocks if not self.ref[b] and (b in self.free or b in expired))

    def _drop(self, victims):
        for block in victims:
            self.queue.remove([block, next(s for b, s in self.queue if b == block)])
            key = self.key_of.pop(block)
            del self.cached[key]
            self.evicted.append((key, self.writer[block], self.index[block]))

    def allocate(self, count: int) -> list[int]:
        out = list(range(self.created, min(self.capacity, self.created + count)))
        self.created += len(out)
        while len(out) < count and self.free:
            out.append(self.free.pop(0))
        victims = self.expired()[:count - len(out)]
        self._drop(victims)
        out += victims
        assert len(out) == count
        for block in out:
            self.ref[block] = 1
        return out

    def match(self, keys) -> list[int]:
        found = []
        for key in keys:
            if key not in self.cached:
                break
            found.append(self.cached[key])
        if self.ttl:
            for block in reversed(found):
                if not self.ref[block]:
                    self.queue = [e for e in self.queue if e[0] != block] + [[block, self.now]]
        return found

    def touch(self, blocks):
        for block in blocks:
            if not self.ref[block]:
                self.queue = [e for e in self.queue if e[0] != block]
            self.ref[block] += 1

    def register(self, blocks, keys, start, writer):
        for index in range(start, len(keys)):
            if keys[index] not in self.cached:
                self.cached[keys[index]] = blocks[index]
                self.key_of[blocks[index]] = keys[index]
                self.writer[blocks[index]], self.index[blocks[index]] = writer, index

    def release(self, blocks):
        for block in reversed(blocks):
            self.ref[block] -= 1
            if not self.ref[block]:
                if block in self.key_of:
                    self.queue.append([block, self.now])
                else:
                    self.free.append(block)

    def evict(self, count: int) -> int:
        victims = self.expired()[:count]
        self._drop(victims)
        self.free += victims
        return len(victims)


OPS = st.lists(st.one_of(
    st.tuples(st.just("request"), st.integers(0, 3), st.integers(1, 7), st.booleans()),
    st.tuples(st.just("release"), st.integers(0, 7)),
    st.tuples(st.just("evict"), st.integers(1, 6)),
    st.tuples(st.just("tick"), st.integers(1, 30))), max_size=60)


def check(capacity: int, ttl: int, ops) -> None:
    clock = Clock()
    pool, model = ApcPool(capacity, clock, ttl), Model(capacity, ttl)
    evicted: list = []
    pool.on_evict = lambda p, keys, runs: evicted.extend(victims(keys, runs))
    held: list[list[int]] = []
    for op in ops:
        if op[0] == "request":  # a prompt's keys: prompts share prefixes, and a partial last block has no key
            _, prompt, length, partial = op
            keys = [prompt % 2 * 100 + j for j in range(length)]
            if prompt >= 2:
                keys = keys[:1] + [prompt * 1000 + j for j in range(1, length)]
            found = pool.match(keys, length)
            assert found == model.match(keys)
            need = length - len(found) + partial
            room = pool.free_count - pool.free_among(found)
            assert room == model.free_count() - model.free_among(found)
            if room < need:
                continue
            pool.touch(found)
            model.touch(found)
            new = pool.allocate(need)
            assert new == model.allocate(need)
            blocks = found + new
            pool.register_run(blocks, keys, len(found), length, prompt)
            model.register(blocks, keys, len(found), prompt)
            held.append(blocks)
        elif op[0] == "release" and held:
            blocks = held.pop(op[1] % len(held))
            pool.release(blocks)
            model.release(blocks)
        elif op[0] == "evict":
            assert pool.evict(op[1]) == model.evict(op[1])
        elif op[0] == "tick":
            clock.now += op[1]
            model.now = clock.now
        assert pool.idle_blocks() == [block for block, _ in model.queue]
        assert list(pool.free) == model.free
        assert pool.free_count == model.free_count()
        assert pool.cached == model.cached
        assert evicted == model.evicted
        assert pool.ref[:pool.created] == [model.ref.get(block, 0) for block in range(pool.created)]
        # (a release tells unkeyed blocks from the writers' column: it must say "no key" exactly where key_of does)
        assert [number < 0 for number in pool.writers.serial[:pool.created].tolist()] == \
            [key is None for key in pool.key_of]
        # a writer is held exactly while some block it keyed is keyed still, and counted by how many
        writers, serials = pool.writers, pool.writers.serial[:pool.created].tolist()
        counts = [serials.count(number) for number in range(len(writers.specs))]
        assert writers.held[1:] == counts[1:]
        assert [spec is not None for spec in writers.specs[1:]] == [count > 0 for count in counts[1:]]
        assert sorted(writers.numbers.values()) == [n for n in range(1, len(counts)) if counts[n]]


@settings(max_examples=300, deadline=None)
@given(st.integers(4, 24), st.sampled_from([0, 10, 40]), OPS)
def test_apc_pool_follows_the_plain_rules(capacity, ttl, ops):
    check(capacity, ttl, ops)


def test_a_protected_block_waits_and_expired_ones_are_evicted_tail_first_then_handed_out_after_fresh_ones():
    # 4 blocks, TTL 10 ns: a prompt of 3 blocks released at 0 enters the queue tail first (2, 1, 0)
    clock = Clock()
    pool = ApcPool(4, clock, 10)
    evicted: list = []
    pool.on_evict = lambda p, keys, runs: evicted.extend(victims(keys, runs))
    blocks = pool.allocate(3)
    pool.register_run(blocks, [7, 8, 9], 0, 3, "A")
    pool.release(blocks)
    assert (pool.idle_blocks(), pool.free_count) == ([2, 1, 0], 1)
    clock.now = 9  # still inside the window: nothing can go
    assert (pool.evict(2), pool.ttl_skipped, evicted) == (0, 3, [])
    clock.now = 10  # 0 + 10: outside it
    assert pool.evict(2) == 2 and evicted == [(9, "A", 2), (8, "A", 1)]
    assert (list(pool.free), pool.free_count, pool.idle_blocks()) == ([2, 1], 4, [0])
    assert pool.allocate(3) == [3, 2, 1]  # never-used first, then the free ones first freed first
    assert pool.cached == {7: 0}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 19), max_size=12), st.integers(1, 3))
def test_one_picker_gathers_each_column_as_a_loop_does(indices, columns):
    # (the release and the eviction gather several per-block columns with one itemgetter: `picker`)
    from kvreplay.runtime.tiers.apc_queue import gather, picker
    pick = picker(indices)
    for c in range(columns):
        column = [c * 100 + i for i in range(20)]
        assert list(pick(column)) == [column[i] for i in indices] == gather(column, indices)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 63), min_size=1, max_size=40), st.sampled_from([(16, 16), (16, 64), (8, 24), (16, 48)]))
def test_a_runs_largest_aligned_index_is_the_same_from_a_numpy_view_as_from_a_list(positions, sizes):
    # (an eviction batch's runs carry their chain indices as numpy views, apc_writers.py; one victim's as a list)
    import numpy as np

    from kvreplay.runtime.tiers.kvc import _last_aligned
    size, chunk = sizes
    aligned = [p for p in positions if (p + 1) * size % chunk == 0]
    expected = max(aligned) if aligned else None
    assert _last_aligned(positions, size, chunk) == expected
    assert _last_aligned(np.array([0, *positions], np.int64)[1:], size, chunk) == expected
