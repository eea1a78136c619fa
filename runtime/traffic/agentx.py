"""Agentic traffic: plays replayed as trees of dependent requests, at most `agentic_lanes` plays at once.

The plan's `AgenticSource` holds each play flattened into nodes that name the nodes they wait for
(the compiler's weka, agentic_mooncake and mooncake-delta readers).  A play starts at its authored time
(with lanes: when a lane is free, in corpus order); a node with nothing to wait for is released its delay
after the play's start, any other its delay after the last node it waits for completes.  A rejected node
releases nothing that waits for it; a play ends when every node it released has ended, and its lane takes
the next play.  The summary says what AISimulate says of these results: `functional_only` (the dependency
timing is the trace's, not a measured agent's).

The loads AISimulate documents (docs/replay/workloads.md, "Agentic load controls"), each in its module:
- `agentic_snapshot`: only the lanes' initial plays run, each from a sampled cut (agentic_snapshot.py).
- `agentic_warmup`: each lane sends its primers and WARMUP_REPEATS repeats of them before a barrier; the
  preparation requests are numbered from WARM_BASE and kept out of the outputs (agentic_measured.py).
- `agentic_profile`: a lane whose play ended takes the corpus's next play (wrapping, with fresh block
  identities) until the admission deadline, and the run stops `response_grace` after it (open requests are
  canceled by their engine's rule, shell/arrivals.py `cancel_open`); idle guards advance pending timers
  (agentic_idle.py).
"""
from __future__ import annotations

from collections import deque
from dataclasses import replace

from ..serving.requests import Content, RequestSpec
from .agentic_idle import IdleGuards
from .agentic_measured import MeasuredLog
from .agentic_play import RunningPlay
from .agentic_report import settled_outcome, summary_section
from .agentic_snapshot import cut_of, record, snapshot

WARMUP_REPEATS = 10  # per lane, as AISimulate's warmup stage
WARM_BASE = 1 << 40  # warm-up request indices: apart from the measured ones (0, 1, ...), which the outputs show


class AgenticTraffic:
    kind = "agentic"
    open_loop = False  # a node's end releases the nodes that wait for it
    request_limit = None

    def __init__(self, traffic):
        self.plan = traffic
        self.source = source = traffic.source
        self.next_index = 0
        self.waiting = deque(range(len(source.plays)))  # plays no lane has taken yet
        self._node_of: dict[int, tuple[RunningPlay, int]] = {}  # request index -> (its play, its node)
        self.outcomes: list[dict] = []
        self.warm_sent = 0
        self.primers_sent = 0
        self.lane_queues: dict[int, deque] = {}  # warm-up index -> its lane's preparation requests still to send
        self.barrier_ns: int | None = None
        self.open_total = 0  # measured requests released and not ended
        self.plays_started = 0
        self.incarnations = [0] * len(source.plays)  # times each play was taken
        self.id_span = 1 + max((h for play in source.plays for node in play.nodes for h in node.hash_ids), default=0)
        self.snapshots: list[dict] = []
        self.prepared: list[tuple[int, object, list]] = []  # (position, play from its cut, primers) per lane
        self.profile = source.profile
        self.deadline_ns = None if self.profile is None else self.profile.duration_ns
        self.stop_ns = traffic.stop_ns if self.profile is None else self.deadline_ns + self.profile.response_grace_ns
        self.cursor = 0  # the profile's corpus cursor: the next play a lane takes
        # the profile cancels the requests still open when the run stops (response_grace after the deadline)
        self.cancels_at_stop = self.profile is not None
        self.guards = None if self.profile is None else IdleGuards(self, self.profile)

    def bind(self, replay) -> None:
        """The replay whose queue holds this traffic's timers (the idle guards move them)."""
        if self.guards is not None:
            self.guards.replay = replay

    @property
    def never_issued(self) -> int:
        """Releases that fell past the profile's deadline (and no guard brought before it)."""
        return sum(len(r.held) for r in self.holding())

    def holding(self) -> list:
        """The plays with releases held past the deadline (their lanes take no other play)."""
        return [] if self.guards is None else [r for r in self.guards.live.values() if r.held]

    # ------------------------------------------------------------------ plays
    def _release(self, running: RunningPlay, node_index: int, arrival_ns: int) -> list[RequestSpec]:
        if self.deadline_ns is not None and arrival_ns > self.deadline_ns:
            running.held[node_index] = arrival_ns  # its timer runs to the deadline: its lane takes no other play
            return []
        spec = self._issue(running, node_index, arrival_ns)
        if self.guards is not None:
            running.timers[node_index] = spec
        return [spec]

    def release_held(self, running: RunningPlay) -> list[RequestSpec]:
        """The held releases an idle guard brought before the deadline, queued now."""
        out = []
        for node_index, at in sorted(running.held.items(), key=lambda item: (item[1], item[0])):
            if at <= self.deadline_ns:
                del running.held[node_index]
                out += self._release(running, node_index, at)
        return out

    def _issue(self, running: RunningPlay, node_index: int, arrival_ns: int) -> RequestSpec:
        node = running.play.nodes[node_index]
        index = self.next_index
        self.next_index += 1
        running.open += 1
        self.open_total += 1
        self._node_of[index] = (running, node_index)
        content = Content(hash_ids=self._ids(node, running.incarnation), trace_block=self.source.block_size)
        name = self.request_name(running, node_index)
        return RequestSpec(index, node.input_length, node.output_length, content, arrival_ns=arrival_ns,
                           session_id=f"{self.play_name(running)}:{node.conversation}", name=name)

    def _ids(self, node, incarnation: int) -> tuple:
        """A play taken again is a new agent session: its blocks are not the earlier incarnation's."""
        if incarnation == 0:
            return node.hash_ids
        return tuple(h + incarnation * self.id_span for h in node.hash_ids)

    @staticmethod
    def request_name(running: RunningPlay, node_index: int) -> str:
        name = running.play.nodes[node_index].name
        return name if running.incarnation == 0 else f"{name}#{running.incarnation}"

    def play_name(self, running: RunningPlay) -> str:
        return running.play.name if running.incarnation == 0 else f"{running.play.name}#{running.incarnation}"

    def _take(self, position: int) -> int:
        self.plays_started += 1
        incarnation = self.incarnations[position]
        self.incarnations[position] += 1
        return incarnation

    def _start_play(self, position: int, play, start_ns: int) -> list[RequestSpec]:
        """A play from its (possibly cut) first nodes, started at `start_ns`: its roots."""
        running = RunningPlay(position, play, start_ns, self._take(position))
        if self.guards is not None:
            self.guards.started(running, start_ns)
        out = []
        for i, node in enumerate(play.nodes):
            if not node.waits_for:
                out += self._release(running, i, start_ns + node.delay_ns)
        if running.open == 0 and not running.held:  # (nothing released: an empty play)
            self._finished(running, start_ns)
        return out

    def _launch(self, at_ns: int | None = None) -> list[RequestSpec]:
        """The next waiting play, started at `at_ns` (a freed lane) or its authored start."""
        position = self.waiting.popleft()
        play = self.source.plays[position]
        return self._start_play(position, play, play.start_ns if at_ns is None else at_ns)

    def _lane_count(self) -> int:
        lanes = self.source.lanes
        if self.source.snapshot_seed is not None:
            return lanes
        return len(self.waiting) if lanes is None else min(lanes, len(self.waiting))

    def start(self) -> list[RequestSpec]:
        count = self._lane_count()
        if self.source.snapshot_seed is not None:
            self._cut_lanes(count)
        if self.source.warmup and count:
            out = []
            for lane in range(count):
                out += self._prepare(lane)
            return out
        return self._begin(0 if self.source.lanes is not None else None)

    def _cut_lanes(self, count: int) -> None:
        """Each initial lane's play from its cut (lane i: play i of the corpus, wrapping)."""
        seed, plays = self.source.snapshot_seed, self.source.plays
        for lane in range(count):
            position = lane % len(plays)
            cut = cut_of(plays[position], seed, lane)
            rest, primers = snapshot(plays[position], cut)
            self.prepared.append((position, rest, primers))
            self.snapshots.append(record(lane, plays[position], seed, cut, rest, primers))
        self.waiting.clear()
        self.cursor = count % len(plays)

    def _begin(self, at_ns: int | None) -> list[RequestSpec]:
        """The measured plays' first requests: the lanes' cut plays, or the first plays of the corpus."""
        out = []
        if self.prepared:
            for position, play, _ in self.prepared:
                out += self._start_play(position, play, at_ns or 0)
        else:
            for _ in range(self._lane_count()):
                out += self._launch(at_ns)
        if self.guards is not None:
            self.guards.reset(at_ns or 0)
            out += self.guards.evaluate(at_ns or 0)
        return sorted(out, key=lambda spec: (spec.arrival_ns, spec.index))

    # ------------------------------------------------------------------ warm-up
    def _prepare(self, lane: int) -> list[RequestSpec]:
        """A lane's preparation requests (primers, then the repeats) queued; its first one sent at 0."""
        if self.prepared:
            _, play, primers = self.prepared[lane]
        else:
            play, primers = self.source.plays[self.waiting[lane]], []
        repeated = primers or [play.nodes[0]]
        queue = deque(self._template(node, "primer") for node in primers)
        queue += (self._template(repeated[i % len(repeated)], "warmup") for i in range(WARMUP_REPEATS))
        return [self._warm(queue, 0)]

    def _template(self, node, stage: str) -> RequestSpec:
        content = Content(hash_ids=node.hash_ids, trace_block=self.source.block_size)
        return RequestSpec(WARM_BASE, node.input_length, 1, content, session_id=stage, name=stage)

    def _warm(self, queue: deque, arrival_ns: int) -> RequestSpec:
        template = queue.popleft()
        self.primers_sent += template.name == "primer"
        spec = replace(template, index=WARM_BASE + self.warm_sent, arrival_ns=arrival_ns,
                       name=f"{template.name}:{self.warm_sent}")
        self.warm_sent += 1
        self.lane_queues[spec.index] = queue
        return spec

    def _warmed(self, spec: RequestSpec, now_ns: int) -> list[RequestSpec]:
        """A preparation request ended: its lane's next one, or at the barrier (every lane done) the plays."""
        queue = self.lane_queues.pop(spec.index)
        if queue:
            return [self._warm(queue, now_ns)]
        if self.lane_queues:
            return []
        self.barrier_ns = now_ns
        if self.profile is not None:
            self.deadline_ns = now_ns + self.profile.duration_ns
            self.stop_ns = self.deadline_ns + self.profile.response_grace_ns
        return self._begin(now_ns)

    def measured_log(self, log):
        """The log the outputs read: without warm-up requests, measured times from the barrier."""
        return MeasuredLog(log, self) if self.source.warmup else log

    @staticmethod
    def measured(spec: RequestSpec) -> bool:
        return spec.index < WARM_BASE

    @staticmethod
    def session_number(spec: RequestSpec) -> None:
        """None: a play's requests keep the replay's event order (the session order of shell/arrivals.py
        `TURN_SEQ` is for synthetic session turns)."""
        return None

    # ------------------------------------------------------------------ ends
    def after(self, spec: RequestSpec, now_ns: int, completed: bool) -> list[RequestSpec]:
        """The nodes `spec`'s end releases, and with its play's end the next play a lane takes."""
        if spec.index >= WARM_BASE:
            return self._warmed(spec, now_ns)
        running, node_index = self._node_of.pop(spec.index)
        running.open -= 1
        running.ended += 1
        self.open_total -= 1
        running.end_ns = max(running.end_ns, now_ns)
        out = []
        if not completed and running.failure is None:
            running.failure = ("rejected", self.request_name(running, node_index))
        if completed:
            for follower in running.dependents[node_index]:
                running.pending[follower] -= 1
                if running.pending[follower] == 0:
                    out += self._release(running, follower, now_ns + running.play.nodes[follower].delay_ns)
        if running.open == 0 and not running.held:
            self._finished(running, now_ns)
            out += self._next_play(now_ns)
        if self.guards is not None:
            self.guards.ended(running, now_ns)
            out += self.guards.evaluate(now_ns)
        return out

    def _next_play(self, now_ns: int) -> list[RequestSpec]:
        """What a freed lane takes: the profile's next play (until the deadline), or the next waiting play."""
        if self.profile is not None:
            if now_ns >= self.deadline_ns:
                return []
            position = self.cursor
            self.cursor = (self.cursor + 1) % len(self.source.plays)
            return self._start_play(position, self.source.plays[position], now_ns)
        if self.waiting and self.source.lanes is not None:
            return self._launch(now_ns)
        return []

    def _finished(self, running: RunningPlay, now_ns: int) -> None:
        self.outcomes.append(settled_outcome(self.play_name(running), running, now_ns))

    def summary_section(self) -> dict:
        """What the summary adds for agentic traffic (AISimulate's names where it has them)."""
        return summary_section(self)
