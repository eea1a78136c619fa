"""Fused decode passes in bulk: how many run, and a rank's boundary crossings applied together (shell/macro.py).

`macro.plan` finds a run of pure decode passes; with constant pass times their
number follows from the events alone (`constant_passes`), else the passes are
timed one by one (`timed_passes`).  `macro.apply` hands a rank's events to
`apply_in_bulk` when nothing watches its pool change by change.  Both give
exactly what stepping each pass and each crossing gives (tests/test_fused_crossings.py).
"""
from __future__ import annotations

from ..serving.pass_results import add_decode_block, allocate_decode_block, finish_fused
from ..timing import PassWork


def constant_bound(now: int, duration: int, horizon: int | None, stop: int | None) -> int:
    """How many passes of `duration` from `now` may run: each after the first starts before the horizon, and each
    ends by the stop."""
    bound = -(-(horizon - now) // duration) if horizon is not None else None
    if stop is not None:
        bound = (stop - now) // duration if bound is None else min(bound, (stop - now) // duration)
    return bound if bound is not None else 1 << 62


def constant_passes(states: list, limit: int) -> int:
    """The passes `timed_passes` would run when every pass takes the same time (its horizon and stop are in
    `limit`): they stop at the first pass whose allocations leave some rank short of free blocks."""
    passes = limit
    for state in states:
        if len(state.events) > state.free:  # (else its allocations cannot outnumber its free blocks)
            allocations = [e[0] for e in state.events if not e[1]]
            if len(allocations) > state.free:
                passes = min(passes, allocations[state.free])  # (the pass of its free + 1st allocation)
    return passes


def timed_passes(worker, states: list, now: int, horizon: int | None, stop: int | None,
                  limit: int) -> tuple[list[int], int]:
    """(ends, count) of the passes that can run when a pass's time depends on its batch: pass by pass, each
    after the first starting before the horizon, none leaving a rank short of free blocks at its start or ending
    after the stop."""
    ends, start, passes = [], now, 0
    while passes < limit:
        if passes and horizon is not None and start >= horizon:
            break
        short = False
        for state in states:  # allocations at this pass's start
            events, cursor, free = state.events, state.cursor, state.free
            while cursor < len(events) and events[cursor][0] == passes and events[cursor][1] == 0:
                free -= 1
                cursor += 1
            short = short or free < 0
            state.cursor, state.free = cursor, free
        if short:
            break
        duration = max((worker.timing(PassWork((), state.decoding, state.context + state.decoding * passes))
                        for state in states if state.decoding), default=0)
        if stop is not None and start + duration > stop:
            break
        start += duration
        ends.append(start)
        for state in states:  # requests finishing in this pass release their blocks at its end
            events, cursor = state.events, state.cursor
            while cursor < len(events) and events[cursor][0] == passes:
                request = events[cursor][3]
                # a finishing request's blocks are not counted as freed: they may be shared, and a run
                # that stops early only costs speed, never changes the result
                state.decoding -= 1
                state.context -= request.num_computed + 1
                cursor += 1
            state.cursor = cursor
        passes += 1
    return ends, passes


def apply_in_bulk(rank, events: list, ends: list[int], gaps: list, finished: list) -> None:
    """A rank's fused events when nothing watches the pool change by change (no KV events, no time stamps, no
    admission attempts between passes): each run of boundary crossings between two finishes takes its blocks in
    one allocation.  The same blocks in the same order as one `allocate(1)` per crossing: nothing is released
    between them, and an allocation of n blocks hands out never-used blocks, then the free queue's head, exactly
    as n allocations of one do (a release, which may put empty blocks at the head, ends the run).  A pool that
    names blocks by ranges (g1_extents.py) gives each request its run's blocks after its last one instead: the
    same evictions in the same order, the ids being its own."""
    allocate, state_blocks = rank.pool.allocate, rank.state_blocks
    extends = rank.pool.extends  # (a pool naming blocks by ranges gives each request the id after its last block)
    count, start = len(events), 0
    while start < count:
        stop = start
        while stop < count and not events[stop][1]:
            stop += 1
        if stop > start:
            run = events[start:stop]
            if extends:  # (each request's crossings of the run at once: its blocks one range of ids)
                wanted: dict[int, list] = {}
                for event in run:
                    entry = wanted.get(id(event[3]))
                    if entry is None:
                        wanted[id(event[3])] = [event[3], 1]
                    else:
                        entry[1] += 1
                for request, blocks in wanted.values():
                    allocate_decode_block(rank, request, blocks)
            elif state_blocks:
                for event, block in zip(run, allocate(stop - start)):
                    add_decode_block(rank, event[3], block)
            else:  # (add_decode_block's insertion before no state blocks is an append)
                for event, block in zip(run, allocate(stop - start)):
                    event[3].blocks.append(block)
        if stop < count:  # a finish at the end of its pass
            j, _, _, request = events[stop]
            finished.append(finish_fused(rank, request, j, ends, gaps))
        start = stop + 1
