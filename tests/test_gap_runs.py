"""A request's (gap, count) runs as the outputs read them: the ITL sample's counts and opal's decode values."""
from __future__ import annotations

import json
from array import array
from itertools import chain
from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from runtime.outputs.opal_stats import GapTexts, _decode_values
from runtime.outputs.request_log import add_runs, gap_columns
from runtime.serving.requests import Request

# (up to 80 runs: a listed request of fewer than request_log.FEW_RUNS is counted by a loop, a longer one in columns)
RUNS = st.lists(st.tuples(st.integers(1, 9), st.integers(1, 4)).map(list), max_size=80)


def packed(runs: list) -> array:
    return array("q", chain.from_iterable(runs))


def test_counts_of_runs_by_their_rule():
    # gaps 7, 3, 7 (twice), 5 (three times): 7 -> 3, 3 -> 1, 5 -> 3, in first-seen order
    runs = [[7, 1], [3, 1], [7, 2], [5, 3]]
    for form in (runs, packed(runs)):
        counts = {3: 10}  # (a sample already holding gap 3 keeps its place and adds to it)
        add_runs(counts, form)
        assert list(counts.items()) == [(3, 11), (7, 3), (5, 3)]
    assert gap_columns(runs) == ([7, 3, 7, 5], [1, 1, 2, 3])
    assert gap_columns(packed(runs)) == (array("q", [7, 3, 7, 5]), array("q", [1, 1, 2, 3]))


@settings(max_examples=300, deadline=None)
@given(st.lists(RUNS, max_size=5))
def test_counts_equal_a_loop_over_each_run(requests):
    expected, listed, flat = {}, {}, {}
    for runs in requests:
        for gap, count in runs:
            expected[gap] = expected.get(gap, 0) + count
        add_runs(listed, runs)
        add_runs(flat, packed(runs))
    assert list(listed.items()) == list(expected.items()) == list(flat.items())


def test_decode_values_text():
    # TTFT 0.25 s, then 0.03 s twice and 1.5 s once: json's text of [0.25, 0.03, 0.03, 1.5]
    request = SimpleNamespace(arrival_ns=1_000, first_token_ns=250_001_000, gaps=[[30_000_000, 2], [1_500_000_000, 1]])
    texts = GapTexts()
    assert _decode_values(request, texts) == "[0.25, 0.03, 0.03, 1.5]"
    assert dict(texts) == {30_000_000: ", 0.03", 1_500_000_000: ", 1.5"}  # (each distinct gap's text made once)
    request.gaps = packed(request.gaps)
    assert _decode_values(request, texts) == "[0.25, 0.03, 0.03, 1.5]"
    request.gaps = []
    assert _decode_values(request, texts) == "[0.25]"


@settings(max_examples=200, deadline=None)
@given(RUNS, st.integers(0, 10**12))
def test_decode_values_are_json_of_each_gap(runs, ttft):
    request = SimpleNamespace(arrival_ns=0, first_token_ns=ttft, gaps=[[gap * 7_919_113, count] for gap, count in runs])
    values = [ttft / 1e9] + [gap / 1e9 for gap, count in request.gaps for _ in range(count)]
    assert _decode_values(request, GapTexts()) == json.dumps(values)


@settings(max_examples=100, deadline=None)
@given(RUNS)
def test_packed_gaps_are_gap_count_pairs_in_run_order(runs):
    request = SimpleNamespace(gaps=[list(run) for run in runs])
    Request.pack_gaps(request)
    assert request.gaps == array("q", [value for run in runs for value in run])
    assert list(zip(*gap_columns(request.gaps))) == [tuple(run) for run in runs]
