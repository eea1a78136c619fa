"""The per-pass shortcuts of a million-request run give what the general code gives: a pass's `PassWork` made
without the dataclass's __init__, and one finished request taken out of the running list in place."""
from __future__ import annotations

import pickle
from dataclasses import replace

from kvreplay.runtime.serving.pass_results import release_finished
from kvreplay.runtime.serving.pass_work import plain_work
from kvreplay.runtime.serving.requests import Content, Request, RequestSpec
from kvreplay.runtime.serving.scheduler import Rank
from kvreplay.runtime.tiers.g1 import BlockPool
from kvreplay.runtime.timing import PassWork


def test_plain_work_is_the_constructors_work():
    made, built = plain_work(((16, 32), (4, 0)), 3, 75), PassWork(((16, 32), (4, 0)), 3, 75)
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert (made.draft_tokens, made.draft_context, made.draft_layers) == (0, 0, 0)
    assert made.prefill_tokens == 20  # 16 + 4
    assert replace(made, decode_requests=4) == PassWork(((16, 32), (4, 0)), 4, 75)
    assert pickle.loads(pickle.dumps(made)) == built
    assert plain_work((), 1, 9) != PassWork((), 1, 10)


def _request(index: int, output: int) -> Request:
    spec = RequestSpec(index, 8, output, Content(segments=((index, 0, 8 + output),)), arrival_ns=0)
    return Request(spec, 0, 0, 4)


def test_one_finished_request_leaves_the_running_list_in_place_in_order():
    pool = BlockPool(16)
    rank = Rank(0, 0, pool, 4, 64, 8, True)
    a, b, c = (_request(i, 2) for i in range(3))
    for request in (a, b, c):
        request.blocks = pool.allocate(2)
        rank.running.append(request)
    same = rank.running
    release_finished(rank, [b], 50)
    assert rank.running is same and rank.running == [a, c]  # (the others keep their order)
    assert (b.status, b.terminal_ns, b.blocks, pool.free_count) == ("completed", 50, [], 12)  # its 2 blocks free
    release_finished(rank, [a, c], 60)  # several at once: the general path
    assert rank.running == [] and pool.free_count == 16
