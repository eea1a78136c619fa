"""One opal workload stage's requests: what arrives when the stage starts, and what a request's end brings.

A run is made when its stage starts (at `t0`, the instant the previous stage's
last request ended) and turns the compiler's stage record into `RequestSpec`s:
`begin(t0)` gives the arrivals known then, `follow(spec, now, completed)` the
ones a request's end causes (only otel sessions have any).  `cut` is set when
the simulation's stop time dropped some of the stage's arrivals: such a stage
never ends, so no later stage may start.  `StagedTraffic` (opal_stages.py)
chains the runs; this module only knows one stage at a time.

A rate stage draws as opal does, so the same config gives opal's request
lengths: a fresh numpy `Generator(PCG64(seed))` per stage (numpy is a
dependency for exactly this), and per request its prompt length, then its
output length, each `integers(low, high + 1)`; an exponential stage then
draws the gap to the next request from the same generator (opal draws it from
numpy's unseeded global generator, so its arrivals differ run to run).
"""
from __future__ import annotations

from collections import deque

from ..serving.requests import Content, RequestSpec
from ..virtual_time import seconds_to_ns
from .generator import SRC_REQUEST

TRACE_TOKEN_SOURCE = 1 << 31  # trace ids keyed as tokens (see TraceRun); outputs are below, at 2**20 + 2 * index
PROMPT_SOURCE = 0  # token p of source 0 has id p: every rate prompt is 0..n-1 (block_keys.token_ids)


def output_source(index: int) -> int:
    """The token source of request `index`'s own output (as the synthetic traffic numbers it: unique per request)."""
    return SRC_REQUEST + 2 * index + 1


def trace_source(hash_id: int, namespace: int, namespaces: int) -> int:
    """The token source of trace id `hash_id` in chunk-size namespace `namespace` (of `namespaces`): distinct for
    every pair below 2**31 // namespaces ids (token ids are 32-bit), and far from the rate stages' sources."""
    return TRACE_TOKEN_SOURCE + hash_id * namespaces + namespace


def _past(stop_ns: int | None, arrival_ns: int) -> bool:
    return stop_ns is not None and arrival_ns > stop_ns


class RateRun:
    """UniformReqRate / ExponentialReqRate: `total_requests` requests, all known when the stage starts.

    Request i arrives at t0 + i / rate (uniform), or after i exponential gaps of mean 1 / rate (exponential:
    the first at t0 too, as opal sends a request and then waits; the gaps are summed in seconds and rounded
    once, as the synthetic Poisson load does)."""

    def __init__(self, stage, position: int, owner):
        self.stage, self.position, self.owner = stage, position, owner
        self.cut = False

    def begin(self, t0: int) -> list[RequestSpec]:
        import numpy  # (here, not at import: only a rate stage needs it, and importing it slows every command)

        stage, k, stop_ns = self.stage, self.position, self.owner.stop_ns
        draws = numpy.random.Generator(numpy.random.PCG64(self.owner.seed))
        out, elapsed = [], 0.0
        for i in range(stage.total_requests):
            offset = seconds_to_ns(i / stage.request_rate if stage.kind == "uniform" else elapsed)
            if _past(stop_ns, t0 + offset):  # arrivals only grow: none of the rest arrives either
                self.cut = True
                break
            prompt = int(draws.integers(stage.prompt_min, stage.prompt_max + 1))
            output = int(draws.integers(stage.output_min, stage.output_max + 1))
            if stage.kind == "exponential":
                elapsed += float(draws.exponential(1.0 / stage.request_rate))
            index = self.owner.new_index()
            content = Content(segments=((PROMPT_SOURCE, 0, prompt), (output_source(index), 0, output)))
            out.append(RequestSpec(index, prompt, output, content, arrival_ns=t0 + offset, stage=k))
        return out

    def follow(self, spec: RequestSpec, now_ns: int, completed: bool) -> list[RequestSpec]:
        return []


class TraceRun:
    """A trace stage: each row arrives at t0 + its timestamp (opal stamps it at the previous arrival instead).

    chunk_size 1: the hash ids are the prompt's token ids (hashed as real tokens, like otel prompts).  Otherwise
    they are Mooncake prefix-chained ids of `chunk_size` tokens each, the last possibly shorter, keyed by
    block_keys.trace_keys: cheap, but the keys of one id depend on the chunk size, so only the plan's first
    chunk size (namespace 0) is keyed so.  A trace stage with another chunk size gets tokens instead: id h of
    namespace n is a run of tokens of its own source, so its blocks never meet another chunk size's.  A request's
    output tokens are its own."""

    def __init__(self, stage, position: int, owner):
        self.stage, self.position, self.owner = stage, position, owner
        self.namespace = owner.trace_namespace(stage.chunk_size)
        self.cut = False

    def _content(self, row, index: int) -> Content:
        chunk = self.stage.chunk_size
        output = (output_source(index), 0, row.output_length)
        if chunk == 1:
            return Content(segments=(output,), token_ids=row.hash_ids)
        if self.namespace == 0:
            return Content(hash_ids=row.hash_ids, trace_block=chunk)
        last = row.input_length - chunk * (len(row.hash_ids) - 1)  # the last id's tokens (maybe fewer)
        count = self.owner.trace_namespaces
        segments = tuple((trace_source(h, self.namespace, count), 0, chunk) for h in row.hash_ids[:-1])
        return Content(segments=segments + ((trace_source(row.hash_ids[-1], self.namespace, count), 0, last),
                                            output))

    def begin(self, t0: int) -> list[RequestSpec]:
        out = []
        for row in self.stage.rows:
            arrival = t0 + row.timestamp_ns
            if _past(self.owner.stop_ns, arrival):  # rows need not be sorted: skip it, keep looking
                self.cut = True
                continue
            index = self.owner.new_index()
            out.append(RequestSpec(index, row.input_length, row.output_length, self._content(row, index),
                                   arrival_ns=arrival, session_id=row.session_id, stage=self.position))
        return out

    def follow(self, spec: RequestSpec, now_ns: int, completed: bool) -> list[RequestSpec]:
        return []


class OtelRun:
    """A pretokenized otel stage: sessions in file order, at most `max_concurrent_sessions` at once.

    A session's first turn arrives as soon as it has a slot (at the stage's start, or when a session ends): as in
    opal, a session's times count from its own first turn, so the spacing between sessions in the file (a day,
    in the shipped one) is not replayed.  Turn i > 0 arrives
    max(0, start_i - end_{i-1}) * inter_turn_multiplier after turn i - 1 ended.  A rejected turn ends its
    session (its later turns' prompts hold the output it never made), as the synthetic sessions do.  At most
    `total_requests` turns are issued over the stage.  Tokens: the turn's prompt ids then its output ids, as
    real token ids, so a turn's output is reused by the next turn's prompt; an empty output is one token of the
    request's own."""

    def __init__(self, stage, position: int, owner):
        self.stage, self.position, self.owner = stage, position, owner
        self.cut = False  # arrivals past the stop are issued: the replay never reaches them
        self.pending = deque(s for s in stage.sessions if s.turns)
        self.active = 0
        self.issued = 0
        self.turn_of: dict[int, tuple] = {}  # request index -> (session, turn position)
        self.t0 = 0

    def _room(self) -> bool:
        return self.stage.total_requests is None or self.issued < self.stage.total_requests

    def _turn(self, session, turn: int, arrival_ns: int, think_ns: int) -> RequestSpec:
        index = self.owner.new_index()
        self.issued += 1
        this = session.turns[turn]
        output = len(this.output_ids)
        if output:
            content = Content(token_ids=this.prompt_ids + this.output_ids)
        else:
            output = 1
            content = Content(segments=((output_source(index), 0, 1),), token_ids=this.prompt_ids)
        self.turn_of[index] = (session, turn)
        return RequestSpec(index, len(this.prompt_ids), output, content, arrival_ns=arrival_ns,
                           session_id=session.id, turn_index=turn, think_ns=think_ns, stage=self.position)

    def _start_session(self, now_ns: int) -> RequestSpec | None:
        if not self.pending or not self._room():
            return None
        session = self.pending.popleft()
        self.active += 1
        return self._turn(session, 0, now_ns, 0)

    def begin(self, t0: int) -> list[RequestSpec]:
        self.t0 = t0
        cap = self.stage.max_concurrent_sessions
        out = []
        while cap is None or self.active < cap:
            spec = self._start_session(t0)
            if spec is None:
                break
            out.append(spec)
        return out

    def follow(self, spec: RequestSpec, now_ns: int, completed: bool) -> list[RequestSpec]:
        session, turn = self.turn_of.pop(spec.index)
        turns = session.turns
        if completed and turn + 1 < len(turns) and self._room():
            think = max(0, int(round((turns[turn + 1].start_ns - turns[turn].end_ns)
                                     * self.stage.inter_turn_multiplier)))
            return [self._turn(session, turn + 1, now_ns + think, think)]
        self.active -= 1  # the session is over: its slot takes the next session
        follow = self._start_session(now_ns)
        return [follow] if follow is not None else []


RUNS = {"RateStage": RateRun, "TraceStage": TraceRun, "OtelStage": OtelRun}


def make_run(stage, position: int, owner):
    """The run of `stage` (a RateStage, TraceStage or OtelStage record), the `position`-th of the plan; `owner`
    (the StagedTraffic) gives the seed, the stop time, request indices and trace namespaces."""
    return RUNS[type(stage).__name__](stage, position, owner)
