"""The event table: every kind of event the replay queues, its rank among events of one instant, and its handler.

The queue orders events by ``(time_ns, kind, seq)``, so a kind's number is its
rank: at one instant pass ends come first, then the stores of fused decode
passes ending then (and the completions that wait for that instant), copies
starting to move bytes and copies landing, the allocations of fused passes
that wait for their start, handoffs landing, workers waking, arrivals and last
workers leaving, so that a request arriving exactly when a pass ends joins the
next pass; periodic checks (the APC eviction monitor, opal's scaling) come last, after
every arrival, completion and release of the instant.  `handler` names the method
(on the replay, or on the part of it that owns that state) called as
``handler(payload, now)``; `concerns` says which workers' fused decode passes an
event may cut short (see horizons.py; an APC check also makes its worker's fused
passes end by it: `Replay.pass_limits`).
"""
from __future__ import annotations

from typing import NamedTuple


class EventKind(NamedTuple):
    name: str
    handler: str  # dotted attribute path from the replay: "passes.end", "copies.moving", ...
    concerns: str  # "everyone" | "link" (the workers on the copy's link) | "pass_end" (see horizons.py) | "none"
    payload: str  # what the event carries


EVENTS = (
    EventKind("pass_end", "end_pass", "pass_end", "the worker"),
    # the stores a fused decode pass makes at its end (shell/macro.py): after the worker's own pass end of that
    # instant, before any copy lands then, as a stepped pass's stores are; they change no batch
    EventKind("fused_stores", "fused.stores", "none", "(worker, [(rank, request, upto)], pass, deferred ranks): offers, "
              "in rank and batch order, then the deferred ranks' completions of that pass (shell/fused_tail.py)"),
    EventKind("copy_moving", "copies.moving", "link", "(link, transfer): its latency is over"),
    EventKind("copy_done", "copies.done", "link", "(link, version): the link's next completion"),
    # allocations of a fused decode pass that had to wait for its start (shell/fused_tail.py): after that
    # instant's landings, as a stepped pass allocates after every event of the instant; they change no batch
    EventKind("fused_allocations", "fused.allocations", "none", "(fused_tail.Deferred, pass)"),
    EventKind("handoff_done", "handoffs.landed", "everyone", "the request whose P/D transfer landed"),
    EventKind("wake", "wake", "everyone", "a worker that became ready (scaled roles)"),
    EventKind("arrival", "arrivals.arrive", "everyone", "the RequestSpec arriving"),
    EventKind("leave", "draining.leave", "everyone", "(worker, period): it leaves its role"),
    # last of an instant: a check reads the state after the instant's arrivals, completions and releases
    EventKind("check", "periodic", "everyone", "the periodic check to call (tiers/apc_monitor.py, serving/opal_scaling.py)"),
    # a traffic's own timer (an agentic profile's idle guards): unlike a check it keeps the replay going
    EventKind("traffic_timer", "arrivals.timer", "everyone", "the traffic's callable(now) -> the specs it releases"),
)
(PASS_END, FUSED_STORES, COPY_MOVING, COPY_DONE, FUSED_ALLOCATIONS, HANDOFF_DONE, WAKE, ARRIVAL, LEAVE, CHECK,
 TRAFFIC_TIMER) = range(len(EVENTS))


def handlers(replay) -> list:
    """Each kind's bound handler, indexed by kind."""
    out = []
    for kind in EVENTS:
        owner = replay
        path = kind.handler.split(".")
        for name in path[:-1]:
            owner = getattr(owner, name)
        out.append(getattr(owner, path[-1]))
    return out
