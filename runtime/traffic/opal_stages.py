"""An opal config's workload stages as traffic: one stage after another, with `Traffic`'s interface.

The replay shell drives it exactly as it drives `Traffic` (generator.py):
`start()` gives the first stage's arrivals, `after(spec, now, completed)` is
told of every request's end (completed or rejected) and gives what follows.
Stage k + 1 starts at the instant the last request of stage k ended; its
arrival times are offsets from that instant, so a stage's end causes arrivals
and the traffic is open loop in its last stage at most.  Request indices count
on across stages; every `RequestSpec` carries its stage's index (`spec.stage`),
and `stage_bounds` says when each stage started and ended, for the per-stage
outputs.  What one stage issues is opal_stage_runs.py's.
"""
from __future__ import annotations

from ..serving.requests import RequestSpec
from .opal_stage_runs import OtelRun, make_run


def stage_requests(stage) -> int:
    """How many requests a stage issues at most (without a stop time)."""
    kind = type(stage).__name__
    if kind == "RateStage":
        return stage.total_requests
    if kind == "TraceStage":
        return len(stage.rows)
    turns = sum(len(session.turns) for session in stage.sessions)
    return turns if stage.total_requests is None else min(turns, stage.total_requests)


class StagedTraffic:
    cancels_at_stop = False  # (opal's stages end with their requests: nothing is cancelled)

    def __init__(self, opal):
        self.plan = opal
        self.stages = opal.stages
        self.seed = opal.seed
        self.stop_ns = opal.simulation_time_ns
        self.request_limit = sum(stage_requests(stage) for stage in self.stages)  # for the progress line
        self.next_index = 0
        self.stage = -1  # the stage running now
        self.run = None
        self.outstanding = 0  # requests of the running stage issued and not yet ended
        self.stage_bounds: list[list] = []  # [start_ns, end_ns | None] of each stage started so far
        # trace chunk sizes (> 1) in stage order: the first is keyed by its ids, the others as tokens (TraceRun)
        chunks = [s.chunk_size for s in self.stages if type(s).__name__ == "TraceStage" and s.chunk_size > 1]
        self.chunk_namespace = {chunk: n for n, chunk in enumerate(dict.fromkeys(chunks))}
        self.trace_namespaces = len(self.chunk_namespace)

    @property
    def open_loop(self) -> bool:
        """True when a request's end never causes an arrival: in the last stage (or one the stop time cut, so
        none follows), unless it is an otel stage (its sessions' turns follow ends).  The replay reads it at every
        pass, so macro steps may run through completions there."""
        if self.run is None:
            return not self.stages
        last = self.stage == len(self.stages) - 1 or self.run.cut
        return last and not isinstance(self.run, OtelRun)

    def new_index(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index

    def trace_namespace(self, chunk_size: int) -> int:
        return self.chunk_namespace.get(chunk_size, 0)

    def _next_stages(self, now_ns: int) -> list[RequestSpec]:
        """Start the stages after the running one at `now_ns`, until one issues requests (an empty stage ends as it
        starts) or one is cut by the stop time."""
        while self.stage + 1 < len(self.stages):
            self.stage += 1
            self.stage_bounds.append([now_ns, None])
            self.run = make_run(self.stages[self.stage], self.stage, self)
            arrivals = self.run.begin(now_ns)
            self.outstanding = len(arrivals)
            if arrivals or self.run.cut:
                return arrivals
            self.stage_bounds[-1][1] = now_ns
        return []

    def start(self) -> list[RequestSpec]:
        """The first stage's arrivals (the first of its sessions for otel), its clock starting at 0."""
        return self._next_stages(0)

    @staticmethod
    def session_number(spec: RequestSpec) -> None:
        """None: opal's session turns keep the replay's event order (AISimulate's session order is for predict
        traffic, shell/arrivals.py `TURN_SEQ`)."""
        return None

    def after(self, spec: RequestSpec, now_ns: int, completed: bool) -> list[RequestSpec]:
        """Arrivals caused by `spec` ending at `now_ns`: a session's next turn or next session, or, when it was
        the running stage's last request, the next stage's."""
        if spec.stage != self.stage:  # only the running stage has requests in flight
            raise ValueError(f"request {spec.index} of stage {spec.stage} ended during stage {self.stage}")
        self.outstanding -= 1
        arrivals = self.run.follow(spec, now_ns, completed)
        self.outstanding += len(arrivals)
        if self.outstanding or self.run.cut:
            return arrivals
        self.stage_bounds[-1][1] = now_ns
        return self._next_stages(now_ns)
