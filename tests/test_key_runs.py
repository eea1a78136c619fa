"""A request's trace keys as `KeyRuns`: the runs they record hold, and G1's run lengths read from them equal the
key-by-key comparison of a plain list."""
import pickle

from hypothesis import given, settings, strategies as st

from runtime.tiers.g1_key_groups import run_length
from runtime.traffic.block_keys import RUNS_PER, KeyRuns, trace_keys

# hash-id lists: runs of consecutive ids with jumps between them (a prompt's new blocks after a shared prefix)
_ids = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 4)), min_size=1, max_size=6).map(
    lambda parts: [h for start, count in parts for h in range(start, start + count)])


@st.composite
def _keys(draw):
    ids = draw(_ids)
    tokens = draw(st.integers(1, len(ids) * 512))
    keys = trace_keys(ids, tokens, 512, 16)
    if draw(st.booleans()):  # the request's output keys, one descending run
        first = -draw(st.integers(1, 5)) * (1 << 24) - 1
        keys.add(range(first - len(keys), first - len(keys) - draw(st.integers(1, 40)), -1))
    return keys


def test_trace_keys_carry_runs_only_where_a_trace_block_holds_32_engine_blocks():
    assert RUNS_PER == 32
    keys = trace_keys([7, 8, 9, 3], 4 * 512 - 20, 512, 16)
    assert type(keys) is KeyRuns
    # ids 7-9 one range of 96 keys from 7 * 32, then id 3's first 30 full blocks (492 of its 512 tokens)
    assert keys == list(range(224, 320)) + list(range(96, 126)) and keys.starts == [0, 96]
    assert type(trace_keys([7, 8], 1024, 512, 64)) is list  # 8 engine blocks a trace block: plain keys


@settings(max_examples=300, deadline=None)
@given(_keys(), st.data())
def test_runs_are_steps_of_one_and_run_length_matches_the_plain_comparison(keys, data):
    if not keys:
        return
    ends = keys.starts[1:] + [len(keys)]
    for lo, hi in zip(keys.starts, ends):
        step = 1 if hi - lo < 2 or keys[lo + 1] > keys[lo] else -1
        assert keys[lo:hi] == list(range(keys[lo], keys[lo] + step * (hi - lo), step))
    i = data.draw(st.integers(0, len(keys) - 1))
    n = data.draw(st.integers(1, len(keys) - i))
    d = data.draw(st.sampled_from((1, -1)))
    assert run_length(keys, i, n, keys[i], d) == run_length(list(keys), i, n, keys[i], d)
    copy = pickle.loads(pickle.dumps(keys))
    assert type(copy) is KeyRuns and copy == keys and copy.starts == keys.starts
