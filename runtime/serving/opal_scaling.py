"""Dynamic scaling (opal's `enable_scaling`): a worker joins the role when one of its workers is overloaded.

The role is built with `max_workers` workers (`reserved_workers`); the
plan's replica count (`num_workers`) are part of it from 0, the others are in
reserve (no period yet).  Every `check_interval_ns` of virtual time (at
1, 2, 3, ... intervals) a check looks at the workers that are part of the role:
if one has more outstanding requests (routing.outstanding) than
`max_queue_threshold`, the next reserve worker (lowest index first) is asked
for (none once all `max_workers` are part of it).  It gets a period
`(asked, asked + scale_latency_ns, None)` like any scaled worker (scaling.py):
the router places requests on it from `scale_latency_ns` after the check (it
prefers ready workers, and the initial ones always are); a wake event then
starts it.  The summary's `workers` section shows those periods (`joined_ms`:
asked for, `ready_ms`: taking requests).

Decisions (opal leaves them open):
- At most one worker is pending: a check while the last one asked for is not
  ready yet asks for none (with opal's 40 s latency and 1 s checks, asking at
  every check would add 40 workers for one burst).  A check at the instant the
  pending worker becomes ready may ask again.
- Joined workers stay to the end (the reference describes no scaling down).
- The check comes after every other event of its instant (arrivals and
  completions included), and sees the state exactly (`Replay.fuse_to_events`).
- Checks are periodic events (`Replay.push_periodic`): they keep nothing
  alive, the replay ends at its last real event, however many checks are queued.
"""
from __future__ import annotations

from ..shell.events import CHECK, WAKE
from .routing import outstanding


def reserved_workers(plan) -> int:
    """How many workers a role of `plan` must be built with for dynamic scaling (0: no dynamic scaling)."""
    opal = plan.opal
    return opal.router.max_workers if opal is not None and opal.router.scaling else 0


class DynamicScaling:
    """The checks of one role; `asks` lists (check time, worker index) of every worker asked for."""

    def __init__(self, replay, router_plan, role: str = "aggregated"):
        self.replay = replay
        self.threshold = router_plan.max_queue_threshold
        self.latency = router_plan.scale_latency_ns
        self.interval = router_plan.check_interval_ns
        if self.interval <= 0:
            raise ValueError("the scaling checks' interval must be positive")
        self.members = [w for w in replay.workers if w.ranks[0].role == role]
        # workers the plan's static replica steps never make part of the role: the reserve, joining by index
        self.reserve = [w for w in self.members
                        if all(left is not None and left <= joined for joined, _, left in w.periods)]
        for worker in self.members:
            worker.scaled = True  # the summary's `workers` section shows the role's workers and their joins
        for worker in self.reserve:
            worker.periods = []
        self.pending_until = 0  # when the worker asked for last is ready
        self.asks: list[tuple[int, int]] = []

    def start(self) -> None:
        self.replay.push_periodic(self.interval, CHECK, self.check)

    def check(self, now: int) -> None:
        """Periodic event: ask for one more worker if a worker of the role is overloaded; queue the next check."""
        if self.reserve and now >= self.pending_until and self._overloaded(now):
            worker = self.reserve.pop(0)
            ready = now + self.latency
            worker.periods.append((now, ready, None))
            worker.removed.append(None)
            self.pending_until = ready
            self.asks.append((now, worker.index))
            self.replay.push(ready, WAKE, worker)
        self.replay.push_periodic(now + self.interval, CHECK, self.check)

    def _overloaded(self, now: int) -> bool:
        return any(outstanding(worker) > self.threshold for worker in self.members if worker.placeable(now, False))


def attach_scaling(replay, router_plan) -> DynamicScaling | None:
    """Dynamic scaling for the replay of an opal plan whose router has `scaling` on (None: it has not)."""
    if not router_plan.scaling:
        return None
    scaling = DynamicScaling(replay, router_plan)
    replay.fuse_to_events = True
    replay.dynamic_scaling = scaling  # (for tests and outputs)
    scaling.start()
    return scaling
