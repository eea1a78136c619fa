"""Property: a G2 `Tier` (its lazy `run_order.RunOrder`, or `lru_order.LruOrder`) evicts exactly what a plain ordered map would.

`ReferencePool` keeps the held keys in one ordered dict (first = evicted next) and does every operation key by
key, the obvious way; random programs of refreshes, stores, landings, loads and pins over a few request key
lists (keys shared between lists and listed twice included) must give the same accepted keys, the same victims in
the same order, and in the end the same eviction order of everything held.
"""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kvreplay.runtime.tiers import run_order
from kvreplay.runtime.tiers.connectors import PROFILES, order_kind, tier_rules
from kvreplay.runtime.tiers.lru_order import LruOrder
from kvreplay.runtime.tiers.run_order import RunOrder
from kvreplay.runtime.tiers.tier import Tier
from kvreplay.runtime.links.transfers import Link


class ReferencePool:
    def __init__(self, capacity: int, delay: bool, fifo: bool, refresh_on_load_done: bool):
        self.capacity, self.delay, self.fifo, self.refresh_on_load_done = capacity, delay, fifo, refresh_on_load_done
        self.order: dict = {}  # held keys, first = evicted next
        self.storing, self.loading, self.pinned = set(), {}, {}
        self.removed: list = []

    def _to_end(self, keys) -> None:
        for key in keys:
            if key in self.order:
                del self.order[key]
                self.order[key] = None

    def refresh(self, keys: list, upto: int) -> None:
        self._to_end(reversed(list(dict.fromkeys(keys[:upto]))))

    def reserve(self, keys: list, place: bool, refresh: tuple | None) -> list:
        new = [key for key in dict.fromkeys(keys) if key not in self.order]
        room = self.capacity - len(self.order)
        if len(new) > room:
            victims = []
            for key in self.order:
                if len(victims) == len(new) - room:
                    break
                if key not in self.storing and key not in self.loading and key not in self.pinned:
                    victims.append(key)
            for key in victims:
                del self.order[key]
            if victims:
                self.removed.append(victims)
            room += len(victims)
            if len(new) > room:
                new = new[:0 if self.delay else room]
        for key in new:
            self.order[key] = None
        self.storing.update(new)
        if not place:
            self.refresh(*refresh)
        return new

    def stored(self, keys: list) -> None:
        self.storing.difference_update(keys)
        if self.fifo:
            self._to_end(keys)

    def loaded(self, keys: list) -> None:
        _count_down(self.loading, keys)
        if self.refresh_on_load_done:
            self._to_end(keys)

    def unpin(self, keys: list, newest: bool) -> None:
        _count_down(self.pinned, keys)
        if newest:
            self._to_end(keys)


def _count_down(counts: dict, keys: list) -> None:
    for key in keys:
        counts[key] -= 1
        if not counts[key]:
            del counts[key]


def _count_up(counts: dict, keys: list) -> None:
    for key in keys:
        counts[key] = counts.get(key, 0) + 1


keys = st.lists(st.integers(0, 9), max_size=6)
# request key lists sharing prefixes of one list, as turns of a conversation do
key_lists = st.builds(lambda base, cuts: [base[:cut] + tail or [0] for cut, tail in cuts],
                      keys, st.lists(st.tuples(st.integers(0, 7), keys), min_size=1, max_size=4))
# (refreshes, stores and landings are what requests do most; loads and pins hold keys a scan must skip)
kinds = ["refresh"] * 4 + ["offer"] * 3 + ["stored"] * 2 + ["load", "loaded", "pin", "unpin"]
operations = st.lists(st.tuples(st.sampled_from(kinds), st.integers(0, 9), st.integers(0, 9), st.integers(0, 9),
                                st.booleans()), max_size=50)


# (found by a random search: an owner whose run an eviction scan went partly through must claim its whole range
# again at its next refresh, or a key evicted and stored again by another request keeps that request's place)
@example(profile="offloading_v0_32", capacity=3, lists=[[0, 3, 2], [4, 3], [0, 4, 4], [1]], compact=False,
         program=[("offer", 4, 7, 9, True), ("stored", 6, 8, 0, False), ("offer", 0, 4, 6, False),
                  ("offer", 2, 6, 8, True), ("offer", 0, 3, 9, True), ("offer", 2, 9, 7, False),
                  ("refresh", 4, 7, 5, True)])
# (a key held lazily, then an eviction scan that stops short of it: the scan must not take an owner's unheld claim for it)
@example(profile="offloading_v0_32", capacity=1, lists=[[1, 3, 0], [5, 3, 4]], compact=False,
         program=[("refresh", 9, 7, 0, True), ("offer", 7, 9, 0, False), ("offer", 0, 4, 9, True)])
@settings(max_examples=1500, deadline=None)
@given(profile=st.sampled_from(sorted(PROFILES)), capacity=st.integers(1, 6), lists=key_lists, program=operations,
       compact=st.booleans())
def test_host_pool_evicts_like_an_ordered_map(profile, capacity, lists, program, compact):
    floor = run_order._COMPACT_FLOOR
    run_order._COMPACT_FLOOR = 2 if compact else floor  # 2: superseded runs are dropped all the time
    try:
        _run_program(PROFILES[profile], capacity, lists, program)
    finally:
        run_order._COMPACT_FLOOR = floor


@settings(max_examples=800, deadline=None)
@given(profile=st.sampled_from(sorted(PROFILES)), capacity=st.integers(1, 6), lists=key_lists, program=operations)
def test_host_pool_in_one_ordered_map_evicts_like_the_reference(profile, capacity, lists, program):
    """The same programs over `lru_order.LruOrder`, the order the connectors that refresh no prompt at each lookup
    get (connectors.order_kind): its eviction fast path (the oldest keys all idle) and its slow one agree too."""
    _run_program(PROFILES[profile], capacity, lists, program, LruOrder)


def test_each_connector_gets_the_order_its_refreshes_need():
    assert {name: order_kind(profile) for name, profile in PROFILES.items()} == {
        "offloading_v0_24": "runs", "offloading_v0_32": "lru", "simple_cpu_v0_32": "lru"}


def g2_tier(connector, capacity: int, order=RunOrder) -> Tier:
    return Tier("g2", "dp_rank_local", capacity, 1, tier_rules(connector), Link({}), Link({}), order())


def _run_program(connector, capacity: int, lists: list, program: list, order=RunOrder) -> None:
    pool = g2_tier(connector, capacity, order)
    pool.events = []
    reference = ReferencePool(capacity, bool(connector.store_delay_passes), connector.eviction == "fifo",
                              connector.refresh_on_load_done)
    stores, loads, pins = [], [], []
    for op, a, b, c, flag in program:
        keys = lists[a % len(lists)]
        low, high = sorted((b % (len(keys) + 1), c % (len(keys) + 1)))
        if op == "refresh" and high:
            upto = len(keys) if flag else high  # (a request refreshes its whole prompt, again and again)
            pool.refresh(keys, upto)
            reference.refresh(keys, upto)
        elif op == "offer" and high > low:
            part = keys[low:high]
            distinct = len(set(part)) == len(part)
            refresh = None if flag else (keys, len(keys))  # (place=False: the owner's refresh places them)
            accepted = pool.reserve(part, flag, distinct, refresh)
            if not flag:
                pool.refresh(keys, len(keys))
            assert accepted == reference.reserve(part, flag, refresh)
            if accepted:
                stores.append(accepted)
        elif op == "stored" and stores:
            landed = stores.pop(a % len(stores))
            # (a store usually lands as the list `reserve` returned; as copies of two parts of it, it costs more)
            for part in (landed[:b % (len(landed) + 1)], landed[b % (len(landed) + 1):]) if flag else (landed,):
                pool.landed(part)
                reference.stored(part)
        elif op in ("load", "pin"):
            ready = [key for key in keys[low:high] if pool.ready(key)]
            assert ready == [key for key in keys[low:high] if key in reference.order and key not in reference.storing]
            if ready and op == "load":
                pool.start_read(ready)
                _count_up(reference.loading, ready)
                loads.append(ready)
            elif ready:
                pool.pin(ready)
                _count_up(reference.pinned, ready)
                pins.append(ready)
        elif op == "loaded" and loads:
            done = loads.pop(a % len(loads))
            pool.read_done(done)
            reference.loaded(done)
        elif op == "unpin" and pins:
            done = pins.pop(a % len(pins))
            pool.unpin(done, newest=flag)
            reference.unpin(done, flag)
        assert [victims for kind, victims in pool.events if kind == "Removed"] == reference.removed
        assert pool.resident == len(reference.order) and pool.in_flight == reference.storing
    assert sorted(pool.order.held()) == sorted(reference.order)
    everything = pool.order.evict(capacity, set(), {}, {})
    assert everything == list(reference.order)


def test_the_front_keeps_what_an_eviction_scan_could_not_take():
    """A key a scan passes but cannot evict (storing, loading, pinned) stays the oldest: the next scan tries it
    first, and it leaves the front when refreshed."""
    pool = g2_tier(PROFILES["offloading_v0_32"], 3)
    pool.events = []
    keys = [1, 2, 3, 4, 5, 6]
    assert pool.reserve(keys[:3], True, True) == [1, 2, 3]
    pool.landed([1, 3])  # 2 is still being stored
    assert pool.reserve(keys[3:5], True, True) == [4, 5]  # evicts 1 and 3, keeps 2 in front
    assert pool.events[-1] == ("Removed", [1, 3])
    pool.landed([2, 4, 5])
    pool.refresh([4], 1)  # 4 newest: order 2, 5, 4
    assert pool.reserve([6], True, True) == [6]
    assert pool.events[-1] == ("Removed", [2])
    assert pool.order.evict(3, set(), {}, {}) == [5, 4, 6]


def test_one_ordered_map_passes_over_busy_keys_and_keeps_their_place():
    """simple_cpu's G2 (LruOrder): an eviction takes the oldest idle keys; one being read, pinned or still stored
    keeps its place at the front, and a completed read makes its key the newest (refresh_on_load_done)."""
    pool = g2_tier(PROFILES["simple_cpu_v0_32"], 4, LruOrder)
    pool.events = []
    assert pool.reserve([1, 2, 3, 4], True, True) == [1, 2, 3, 4]
    pool.landed([1, 2, 3])  # 4 is still being stored; landings make 1, 2, 3 the newest: order 4, 1, 2, 3
    pool.start_read([1])
    pool.pin([2])
    assert pool.reserve([5], True, True) == [5]  # 4 storing, 1 read, 2 pinned: 3 goes
    assert pool.events[-1] == ("Removed", [3])
    pool.read_done([1])  # order 4, 1, 2, 5 -> 4, 2, 5, 1
    pool.landed([4, 5])  # landings move 4 and 5 to the end: 2, 1, 4, 5
    assert pool.reserve([6, 7], True, True) == [6, 7]  # 2 pinned: 1 and 4 go
    assert pool.events[-1] == ("Removed", [1, 4])
    pool.unpin([2])  # a dropped pin makes 2 the newest: order 2, 5, 6, 7 -> 5, 6, 7, 2 (6 and 7 storing)
    pool.start_read([5])  # the oldest key alone is being read: an eviction of one passes over it (and 6, 7)
    assert pool.order.evict(1, pool._flight, pool.reading, {}) == [2]
    assert pool.order.evict(4, pool._flight, {}, {}) == [5]
