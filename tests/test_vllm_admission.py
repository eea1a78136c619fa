"""vLLM's waiting admission (runtime/serving/scheduler.py `known_sequence`), as AISimulate's mocker applies it.

Rule: a waiting request starts only when the blocks of its whole known sequence (prompt, plus the output a
preempted request already made), less the cached prefix blocks a running request holds, are free; an idle cached
block it finds again counts as one it takes from the free ones.  Chunked prefill then computes only what the
budget allows, but the request no longer starts on its first chunk alone and is preempted at the next.  Block
size 4 and fixed timing 10 ms / 1 ms throughout, with test_scheduler.py's builders.
"""
from __future__ import annotations

from kvreplay.runtime.serving.scheduler import known_sequence

from .test_scheduler import MS, make_rank, make_request, step


def test_a_long_prompt_waits_for_its_whole_sequence_not_its_first_chunk():
    """8 blocks, budget 16.  A (8 + 12) takes 2 blocks and 8 tokens of the budget; B (prompt 28, 7 blocks) would
    fit its first 8-token chunk in 2 of the 6 free blocks, but its whole prompt does not: it waits.  A's output
    grows it to ceil(19 / 4) = 5 blocks, so B waits until A finishes: A's prefill pass (10 ms) and 11 decode
    passes (1 ms) end at 21 ms, and B is admitted then, never preempted."""
    rank = make_rank(8, budget=16)
    a, b = make_request(0, 8, 12), make_request(1, 28, 2)
    rank.waiting.extend([a, b])
    items, now, _, _ = step(rank, 0)
    assert items == [(0, 8)] and list(rank.waiting) == [b]
    assert known_sequence(rank, b, [], 2) == 7 and rank.pool.free_count == 6
    finished = []
    while not finished:
        items, now, finished, _ = step(rank, now)
    assert finished == [0] and now == 21 * MS
    assert b.admissions == []
    items, now, _, _ = step(rank, now)
    assert items == [(1, 16)] and b.first_admit_ns == 21 * MS
    items, now, _, _ = step(rank, now)
    assert items == [(1, 12)]
    while rank.busy:
        _, now, _, _ = step(rank, now)
    assert rank.preemptions == 0 and len(b.admissions) == 1


def test_the_old_rule_would_have_preempted_the_long_prompt():
    """The same two requests with the admission of the first chunk alone (`need`): B starts at 0 on 2 blocks,
    its second chunk (15 tokens: 6 blocks in all) finds 3 free beside A's third, and B, the newest, preempts
    itself: the repeated readmissions issue 13 reported."""
    rank = make_rank(8, budget=16)
    rank.admission = lambda rank, request, hits, need: need
    a, b = make_request(0, 8, 12), make_request(1, 28, 2)
    rank.waiting.extend([a, b])
    items, now, _, _ = step(rank, 0)
    assert items == [(0, 8), (1, 8)]
    items, now, _, _ = step(rank, now)
    assert items == [(0, 1)] and rank.preemptions == 1 and list(rank.waiting) == [b]


def test_a_prefix_held_by_a_running_request_needs_no_free_block():
    """A (prompt 16, 4 blocks) runs.  C shares A's first 12 tokens (3 blocks, held by A) and has 20 tokens (5
    blocks): it needs 5 - 3 = 2 free blocks; with the 3 hits idle (A finished) it would need 2 free beside
    taking the 3 idle ones, which can_allocate counts as taken from the free queue."""
    rank = make_rank(6, budget=64)
    a = make_request(0, 16, 4)
    rank.waiting.append(a)
    _, now, _, _ = step(rank, 0)
    c = make_request(2, 20, 1, source=10)
    hits = rank.pool.match(c.keys, (c.num_tokens - 1) // 4)
    assert len(hits) == 4  # c's first 16 tokens are a's prompt (the same source)
    assert known_sequence(rank, c, hits, 1) == 1
    rank.waiting.append(c)
    items, now, _, _ = step(rank, now)
    assert (2, 4) in items and rank.preemptions == 0
