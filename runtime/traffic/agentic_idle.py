"""A continuous agentic profile's idle guards: pending timers advanced when a play, or the whole workload, is idle.

As AISimulate documents them (docs/replay/agentic/continuous-profiles.md, "Lanes and virtual time"): when a
play has had no outstanding request for `tree_idle_cap`, its pending timers are advanced together so that the
earliest is due then (their gaps and the dependencies kept); when no request of the whole workload has been
outstanding for `global_idle_cap`, every pending timer is advanced likewise.  A request is outstanding from its
release time (its arrival) until it ends; a timer is pending from when its dependencies completed until its
release time, whenever it was scheduled (a side request a play's start scheduled moves as well as a follower
its last request's end scheduled).  A timer past the admission deadline is held here, not queued: a guard may
still bring it before the deadline (then it is released), otherwise it is never issued.  Engine work keeps its
times.  Each shift is reported (`idle_shifts`: its time, the play or None for the global guard, by how much,
how many timers), as AISimulate's `agentic_profile.idle_shifts`.

The guards only act at instants when nothing of what they watch is outstanding, and then nothing can change
until the next timer is due; so each evaluation (after a request ends, when plays start, at the guard's own
timer) knows the next instant a guard can act, and keeps one traffic timer queued for it (`Arrivals.push_timer`,
withdrawn when that instant moves).  Shifted arrivals are withdrawn from the replay's queue and queued again.
"""
from __future__ import annotations

from dataclasses import replace


class IdleGuards:
    def __init__(self, traffic, profile):
        self.traffic = traffic
        self.tree_cap, self.global_cap = profile.tree_idle_cap_ns, profile.global_idle_cap_ns
        self.replay = None  # bound by the replay (`AgenticTraffic.bind`): its queue holds the timers
        self.live: dict[int, object] = {}  # id -> every play with requests or timers still to come
        self.idle_since = 0  # when the whole workload last had no outstanding request
        self.shifts: list[dict] = []
        self.wake_at: int | None = None
        self._wake = self.wake  # (one callable: the queued timer is withdrawn by identity)

    # ------------------------------------------------------------------ bookkeeping
    @staticmethod
    def outstanding(running, now: int) -> int:
        """The play's released requests that arrived and have not ended."""
        return running.open - sum(1 for spec in running.timers.values() if spec.arrival_ns > now)

    def started(self, running, now: int) -> None:
        running.idle_since = now
        self.live[id(running)] = running

    def ended(self, running, now: int) -> None:
        """One of the play's requests ended at `now` (its followers already released)."""
        running.timers = {node: spec for node, spec in running.timers.items() if spec.arrival_ns > now}
        if running.open == 0 and not running.held:
            self.live.pop(id(running), None)
        elif self.outstanding(running, now) == 0:
            running.idle_since = now
        if all(self.outstanding(r, now) == 0 for r in self.live.values()):
            self.idle_since = now

    def reset(self, now: int) -> None:
        """The profile's admission starts (at 0, or at the warm-up barrier): the workload is idle from now."""
        self.idle_since = now

    # ------------------------------------------------------------------ guards
    def evaluate(self, now: int) -> list:
        """Apply the guards due at `now`; queue the timer of the next instant one can act.  The specs it releases."""
        out = []
        plays = list(self.live.values())
        if plays and all(self.outstanding(r, now) == 0 for r in plays) and now >= self.idle_since + self.global_cap:
            out += self._shift(plays, now, None)
        for running in plays:  # (after a global shift the plays whose timer is due now are busy again)
            if self.outstanding(running, now) == 0 and now >= running.idle_since + self.tree_cap:
                out += self._shift([running], now, self.traffic.play_name(running))
        self._schedule(now)
        return out

    def wake(self, now: int) -> list:
        self.wake_at = None
        return self.evaluate(now)

    @staticmethod
    def _due(running) -> list[int]:
        """The due times of the play's pending timers (queued or held)."""
        return [spec.arrival_ns for spec in running.timers.values()] + list(running.held.values())

    def _pending_after(self, running, now: int) -> list[int]:
        return [t for t in self._due(running) if t > now]

    def _shift(self, plays: list, now: int, play_id) -> list:
        due = [t for running in plays for t in self._pending_after(running, now)]
        if not due or min(due) <= now:
            return []
        by = min(due) - now
        out = []
        for running in plays:
            for node, spec in list(running.timers.items()):
                if spec.arrival_ns > now:
                    self.replay.arrivals.withdraw(spec)
                    running.timers[node] = moved = replace(spec, arrival_ns=spec.arrival_ns - by)
                    out.append(moved)
            for node, at in list(running.held.items()):
                running.held[node] = at - by
            out += self.traffic.release_held(running)
        self.shifts.append({"at_ms": now / 1e6, "play_id": play_id, "shifted_by_ms": by / 1e6,
                            "timer_count": len(due)})
        return out

    def _schedule(self, now: int) -> None:
        """Keep one timer queued, at the next instant a guard can act (before the deadline), or none."""
        candidates = []
        plays = list(self.live.values())
        waiting = [r for r in plays if self.outstanding(r, now) == 0 and self._pending_after(r, now)]
        for running in waiting:
            at = running.idle_since + self.tree_cap
            if at < min(self._pending_after(running, now)):
                candidates.append(at)
        if waiting and len(waiting) == len(plays):
            at = self.idle_since + self.global_cap
            if at < min(t for r in waiting for t in self._pending_after(r, now)):
                candidates.append(at)
        deadline = self.traffic.deadline_ns
        at = min((t for t in candidates if now < t <= deadline), default=None)
        if at == self.wake_at:
            return
        if self.wake_at is not None:
            self.replay.arrivals.withdraw(self._wake)
        self.wake_at = at
        if at is not None:
            self.replay.arrivals.push_timer(at, self._wake)
