"""Agentic traffic: AgentX plays replayed as trees of dependent requests, at most `agentic_lanes` plays at once.

The plan's `AgenticSource` holds each play flattened into nodes that name the nodes they wait for
(the compiler's weka reader).  A play starts at its authored time (with lanes: when a lane is
free, in corpus order); a node with nothing to wait for is released its delay after the play's
start, any other its delay after the last node it waits for completes.  A rejected node releases
nothing that waits for it; a play ends when every node it released has ended, and its lane takes
the next play.  The summary says what AISimulate says of these results: `functional_only` (the
dependency timing is the trace's, not a measured agent's).

Warm-up (`agentic_warmup`, AISimulate's "warmup" stage without a snapshot's history): each lane first
sends its play's first request WARMUP_REPEATS times, one after another, with one output token; when
every lane's last one has ended (the barrier) the plays start, from the caches warm-up left.  Warm-up
requests are numbered from WARM_BASE and `measured_log` keeps them out of the outputs.
"""
from __future__ import annotations

from collections import deque
from dataclasses import replace

from ..serving.requests import Content, RequestSpec


class _Running:
    """A play in flight: how many nodes each node still waits for, and how many released nodes are open."""

    def __init__(self, position: int, play, start_ns: int):
        self.position, self.play, self.start_ns = position, play, start_ns
        self.pending = [len(node.waits_for) for node in play.nodes]
        self.dependents: list[list[int]] = [[] for _ in play.nodes]
        for index, node in enumerate(play.nodes):
            for wanted in node.waits_for:
                self.dependents[wanted].append(index)
        self.open = 0
        self.ended = 0
        self.end_ns = start_ns


WARMUP_REPEATS = 10  # per lane, as AISimulate's warmup stage
WARM_BASE = 1 << 40  # warm-up request indices: apart from the measured ones (0, 1, ...), which the outputs show


class _MeasuredLog:
    """The run's request log, told of measured requests only (warm-up is outside latency, throughput, reuse)."""

    def __init__(self, log):
        self._log = log

    def arrived(self, request) -> None:
        if request.spec.index < WARM_BASE:
            self._log.arrived(request)

    def ended(self, request, record: bool = True) -> None:
        if request.spec.index < WARM_BASE:
            self._log.ended(request, record)

    def __getattr__(self, name):
        return getattr(self._log, name)


class AgenticTraffic:
    kind = "agentic"
    open_loop = False  # a node's end releases the nodes that wait for it
    stop_ns = None
    request_limit = None

    def __init__(self, traffic):
        self.plan = traffic
        self.source = traffic.source
        self.next_index = 0
        self.waiting = deque(range(len(self.source.plays)))  # plays no lane has taken yet
        self._node_of: dict[int, tuple[_Running, int]] = {}  # request index -> (its play, its node)
        self.outcomes: list[dict] = []
        self.warm_sent = 0
        self.warm_lanes: dict[int, tuple[RequestSpec, int]] = {}  # warm-up index -> (its lane's template, sent)
        self.barrier_ns: int | None = None

    def _release(self, running: _Running, node_index: int, arrival_ns: int) -> RequestSpec:
        node = running.play.nodes[node_index]
        index = self.next_index
        self.next_index += 1
        running.open += 1
        self._node_of[index] = (running, node_index)
        content = Content(hash_ids=node.hash_ids, trace_block=self.source.block_size)
        return RequestSpec(index, node.input_length, node.output_length, content, arrival_ns=arrival_ns,
                           session_id=f"{running.play.name}:{node.conversation}", name=node.name)

    def _launch(self, at_ns: int | None = None) -> list[RequestSpec]:
        """The next waiting play, started at `at_ns` (a freed lane) or its authored start: its roots."""
        position = self.waiting.popleft()
        play = self.source.plays[position]
        start = play.start_ns if at_ns is None else at_ns
        running = _Running(position, play, start)
        out = [self._release(running, i, start + node.delay_ns) for i, node in enumerate(play.nodes)
               if not node.waits_for]
        if not out:  # (the reader gives every play a first node; kept honest for any plan)
            self._finished(running, start)
        return out

    def start(self) -> list[RequestSpec]:
        lanes = self.source.lanes
        count = len(self.waiting) if lanes is None else min(lanes, len(self.waiting))
        if self.source.warmup and count:
            return [self._warm(self._template(position), 0, 1) for position in range(count)]
        out = []
        for _ in range(count):
            out += self._launch(None if lanes is None else 0)
        return sorted(out, key=lambda spec: (spec.arrival_ns, spec.index))

    def _template(self, position: int) -> RequestSpec:
        """A lane's warm-up request: its play's first request, one output token."""
        node = self.source.plays[self.waiting[position]].nodes[0]
        content = Content(hash_ids=node.hash_ids, trace_block=self.source.block_size)
        return RequestSpec(WARM_BASE, node.input_length, 1, content, session_id="warmup", name="warmup")

    def _warm(self, template: RequestSpec, arrival_ns: int, sent: int) -> RequestSpec:
        spec = replace(template, index=WARM_BASE + self.warm_sent, arrival_ns=arrival_ns,
                       name=f"warmup:{self.warm_sent}")
        self.warm_sent += 1
        self.warm_lanes[spec.index] = (template, sent)
        return spec

    def _warmed(self, spec: RequestSpec, now_ns: int) -> list[RequestSpec]:
        """A warm-up request ended: its lane's next one, or at the barrier (every lane done) the plays."""
        template, sent = self.warm_lanes.pop(spec.index)
        if sent < WARMUP_REPEATS:
            return [self._warm(template, now_ns, sent + 1)]
        if self.warm_lanes:
            return []
        self.barrier_ns = now_ns
        lanes = min(self.source.lanes, len(self.waiting))
        return [spec for _ in range(lanes) for spec in self._launch(now_ns)]

    def measured_log(self, log):
        """The log the outputs read: without warm-up requests (the traffic knows which they are)."""
        return _MeasuredLog(log) if self.source.warmup else log

    @staticmethod
    def session_number(spec: RequestSpec) -> None:
        """None: a play's requests keep the replay's event order (the session order of shell/arrivals.py
        `TURN_SEQ` is for synthetic session turns)."""
        return None

    def after(self, spec: RequestSpec, now_ns: int, completed: bool) -> list[RequestSpec]:
        """The nodes `spec`'s end releases, and with its play's end the next play a lane takes."""
        if spec.index >= WARM_BASE:
            return self._warmed(spec, now_ns)
        running, node_index = self._node_of.pop(spec.index)
        running.open -= 1
        running.ended += 1
        running.end_ns = max(running.end_ns, now_ns)
        out = []
        if completed:
            for follower in running.dependents[node_index]:
                running.pending[follower] -= 1
                if running.pending[follower] == 0:
                    delay = running.play.nodes[follower].delay_ns
                    out.append(self._release(running, follower, now_ns + delay))
        if running.open == 0:
            self._finished(running, now_ns)
            if self.waiting and self.source.lanes is not None:
                out += self._launch(now_ns)
        return out

    def _finished(self, running: _Running, now_ns: int) -> None:
        total = len(running.play.nodes)
        status = "completed" if running.ended == total else "incomplete"
        self.outcomes.append({"play_id": running.play.name, "status": status, "requests": total,
                              "ended_requests": running.ended, "start_ms": running.start_ns / 1e6,
                              "end_ms": now_ns / 1e6})

    def summary_section(self) -> dict:
        """What the summary adds for agentic traffic (AISimulate's names where it has them)."""
        source = self.source
        outcomes = sorted(self.outcomes, key=lambda o: (o["start_ms"], o["play_id"]))
        phases = {"agentic_phases": {"preparation_requests": self.warm_sent, "profile_start_ms":
                                     None if self.barrier_ns is None else self.barrier_ns / 1e6}}
        return {"agentic_qualification": "functional_only", "agentic_input_format": "weka",
                "agentic_lanes": source.lanes, "weka_nested_timestamp_basis": source.basis,
                "agentic_play_outcomes": outcomes, **(phases if source.warmup else {}),
                "completed_trajectories": sum(o["status"] == "completed" for o in outcomes),
                "incomplete_trajectories": len(source.plays) - sum(o["status"] == "completed" for o in outcomes)}
