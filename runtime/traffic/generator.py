"""Traffic: which requests arrive when, as a small state machine driven by the replay.

`Traffic.start()` gives the first arrivals; `Traffic.after(spec, now)` is told
when a request ends (completed or rejected) and gives the arrivals that
follow: the next request of a closed-loop slot, or a session's next turn after
its think time.  It reads the finished plan's traffic record (limits, stop time
and delays resolved, in ns).  Sources: `synthetic`, `synthetic-session`, `trace`
(Mooncake rows the compiler parsed and checked), `requests` (a ReplaySpec list).  Loads: `concurrency` (closed loop; a
session holds its slot through its think time), `poisson` (seeded: AISimulate's
own draw stream, chacha_stream.py), `constant_rate`, `trace_timestamps` (with speedup).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from ..serving.requests import Content, RequestSpec
from ..virtual_time import seconds_to_ns
from .chacha_stream import UniformStream

SRC_SHARED = 0  # the synthetic source's `cached_prefix_tokens`
SRC_GROUP = 1  # + prefix group index
SRC_REQUEST = 1 << 20  # + 2 * request index (its new input), + 1 (its output)


@dataclass
class _Session:
    index: int
    slot: int
    turns: int
    prompt: tuple  # segments of the previous turn's prompt + output, to extend


class Traffic:
    cancels_at_stop = False  # (only an agentic profile cancels what is open at its stop: agentx.py)

    def __init__(self, traffic):
        self.plan = traffic
        self.source = traffic.source
        self.load = traffic.load
        self.kind = traffic.kind
        self.rows = traffic.source.rows if self.kind == "trace" else ()
        self.next_index = 0
        self.sessions_started = 0
        self.requests_made = 0
        self.arrival_counter = 0
        self.request_limit = traffic.request_limit
        self.session_limit = traffic.session_limit
        self.max_in_flight = traffic.max_in_flight
        self.stop_ns = traffic.stop_ns
        self._session_of: dict[int, _Session] = {}

    @property
    def open_loop(self) -> bool:
        """True when a request's end never causes an arrival (no closed loop, no session turns)."""
        if self.kind == "requests":
            return self.max_in_flight is None
        return self.load != "concurrency" and self.kind != "synthetic-session"

    def session_number(self, spec: RequestSpec) -> int | None:
        """The number of the synthetic session `spec` is a turn of (None: not a session turn)."""
        session = self._session_of.get(spec.index)
        return None if session is None else session.index

    # ------------------------------------------------------------------ content
    def _new_index(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index

    def _synthetic(self, arrival_ns: int | None) -> RequestSpec:
        index = self._new_index()
        total_in, out, cached = self.source.input_tokens, self.source.output_tokens, self.source.cached_prefix_tokens
        segments = ((SRC_SHARED, 0, cached),) if cached else ()
        segments += ((SRC_REQUEST + 2 * index, 0, total_in - cached), (SRC_REQUEST + 2 * index + 1, 0, out))
        self.requests_made += 1
        return RequestSpec(index, total_in, out, Content(segments=segments), arrival_ns=arrival_ns)

    def _turn(self, session: _Session, turn: int, arrival_ns: int | None, think_ns: int) -> RequestSpec:
        index = self._new_index()
        new, out = self.source.new_input_tokens_per_turn, self.source.output_tokens_per_turn
        own = SRC_REQUEST + 2 * index
        prompt = session.prompt
        if turn == 0:
            groups = self.source.prefix_groups
            shared = round(new * self.source.shared_prefix_ratio) if groups else 0
            prompt = ((SRC_GROUP + session.index % groups, 0, shared),) if shared else ()
            prompt += ((own, 0, new - shared),)
        else:
            prompt = prompt + ((own, 0, new),)
        prompt_len = sum(stop - start for _, start, stop in prompt)
        session.prompt = prompt + ((own + 1, 0, out),)  # the next turn's prompt starts with this turn's output
        self.requests_made += 1
        spec = RequestSpec(index, prompt_len, out, Content(segments=session.prompt), arrival_ns=arrival_ns,
                           session_id=f"session-{session.index:06d}", turn_index=turn, think_ns=think_ns)
        self._session_of[index] = session
        return spec

    def _start_session(self, slot: int, arrival_ns: int | None) -> RequestSpec | None:
        if self.session_limit is not None and self.sessions_started >= self.session_limit:
            return None
        session = _Session(self.sessions_started, slot, self.source.turns, ())
        self.sessions_started += 1
        return self._turn(session, 0, arrival_ns, 0)

    def _next_synthetic(self, arrival_ns: int | None) -> RequestSpec | None:
        if self.request_limit is not None and self.requests_made >= self.request_limit:
            return None
        return self._synthetic(arrival_ns)

    def _listed(self, position: int, arrival_ns: int | None) -> RequestSpec | None:
        """Request `position` of a ReplaySpec list (token ids hashed as real tokens, else unique tokens)."""
        requests = self.source.requests
        if position >= len(requests):
            return None
        item = requests[position]
        index = position  # (its place in the list, whenever it is made)
        self.next_index = max(self.next_index, position + 1)
        self.requests_made += 1
        own = SRC_REQUEST + 2 * index
        ids = item.input_token_ids
        segments = () if ids else ((own, 0, item.input_tokens),)
        content = Content(segments=segments + ((own + 1, 0, item.output_tokens),), token_ids=ids)
        if arrival_ns is None:
            arrival_ns = item.arrival_ns
        return RequestSpec(index, item.input_tokens, item.output_tokens, content, arrival_ns=arrival_ns,
                           session_id=item.session_id, turn_index=item.turn_index,
                           name=item.id, dp_rank=item.dp_rank, prefill_dp_rank=item.prefill_dp_rank,
                           worker_idx=item.worker_idx, prefill_worker_idx=item.prefill_worker_idx,
                           kv_hints=item.kv_hints)

    def _trace_row(self, position: int, arrival_ns: int | None) -> RequestSpec | None:
        """Trace row `position` as a request arriving at `arrival_ns` (a closed loop's; an open loop's rows are
        made in `_open_loop_arrivals`)."""
        if position >= len(self.rows):
            return None
        row = self.rows[position]
        index = self._new_index()
        self.requests_made += 1
        return RequestSpec.of_trace_row(index, row.input_length, row.output_length, row.hash_ids,
                                        self.source.block_size, arrival_ns, row.session_id)

    # ------------------------------------------------------------------ arrivals
    def _rate_times(self, rate: float):
        """Arrival times (ns) of an open-loop load: Poisson (seeded) or evenly spaced.  The first request arrives
        at t = 0 and each gap follows it (AISimulate's generator does the same): gap k is draw k of the seed's
        exponential stream (chacha_stream.py)."""
        t = 0.0
        draws = UniformStream(self.plan.seed) if self.load == "poisson" else None  # (in call order, as AISimulate's)
        while True:
            yield seconds_to_ns(t)
            if draws is not None:
                t += draws.exponential(rate)
            else:
                t += 1.0 / rate
            self.arrival_counter += 1

    def start(self) -> Iterable[RequestSpec]:
        """The first arrivals: every arrival of an open-loop load, made one at a time as they are asked for (a
        trace may hold millions), or the first request of each closed-loop slot and session."""
        if self.open_loop:
            return self._open_loop_arrivals()
        sessions = self.kind == "synthetic-session"
        if self.kind == "requests":
            self.list_position = 0
            out = []
            for _ in range(self.max_in_flight):
                spec = self._listed(self.list_position, None)
                if spec is None:
                    break
                self.list_position += 1
                out.append(spec)
            return out
        if self.kind == "trace":
            self.trace_position = 0
            out = []
            for _ in range(self.plan.concurrency):
                spec = self._trace_row(self.trace_position, 0)
                if spec is None:
                    break
                self.trace_position += 1
                out.append(spec)
            return out
        if self.load == "concurrency":
            out = []
            for slot in range(self.plan.concurrency):
                spec = self._start_session(slot, 0) if sessions else self._next_synthetic(0)
                if spec is None:
                    break
                out.append(spec)
            return out
        # sessions at a rate: every first turn now, so that request indices count first turns before later ones
        return list(self._rate_arrivals(self.session_limit, lambda at: self._start_session(-1, at)))

    def _open_loop_arrivals(self) -> Iterator[RequestSpec]:
        if self.kind == "requests":  # a list need not be in arrival order: its requests arrive in time order
            requests = self.source.requests
            for position in sorted(range(len(requests)), key=lambda p: requests[p].arrival_ns):  # (stable)
                if self.stop_ns is not None and requests[position].arrival_ns > self.stop_ns:
                    return
                yield self._listed(position, None)
        elif self.kind == "trace":  # (`_trace_row` of each row, inline: once per row of a million-row trace)
            stop, trace_block, make = self.stop_ns, self.source.block_size, RequestSpec.of_trace_row
            for arrival, prompt_len, output_len, hash_ids, session_id in self.rows:
                if stop is not None and arrival > stop:
                    return
                index = self.next_index
                self.next_index = index + 1
                self.requests_made += 1
                yield make(index, prompt_len, output_len, hash_ids, trace_block, arrival, session_id)
        else:
            yield from self._rate_arrivals(self.request_limit, self._synthetic)

    def _rate_arrivals(self, limit: int | None, make) -> Iterator[RequestSpec]:
        """`make(arrival_ns)` at each arrival time of the load's rate, until `limit` or the stop time."""
        times = self._rate_times(self.plan.rate)
        made = 0
        while limit is None or made < limit:
            arrival = next(times)
            if self.stop_ns is not None and arrival > self.stop_ns:
                return
            made += 1
            yield make(arrival)

    def after(self, spec: RequestSpec, now_ns: int, completed: bool) -> list[RequestSpec]:
        """Arrivals caused by `spec` ending at `now_ns` (closed loops and session turns)."""
        session = self._session_of.pop(spec.index, None)
        if session is not None:
            turn = spec.turn_index + 1
            if not completed:  # a rejected turn made no output: the session goes on without it (AISimulate)
                session.prompt = session.prompt[:-1]
            if turn < session.turns:
                delay = self.source.inter_turn_delay_ns
                return [self._turn(session, turn, now_ns + delay, delay)]
            if self.load == "concurrency":
                follow = self._start_session(session.slot, now_ns)
                return [follow] if follow is not None else []
            return []
        if self.kind == "requests":
            if self.max_in_flight is None:
                return []
            follow = self._listed(self.list_position, None)
            if follow is None:
                return []
            self.list_position += 1
            # a freed slot issues the next request, not before its own arrival time
            return [replace(follow, arrival_ns=max(now_ns, follow.arrival_ns))]
        if self.load != "concurrency":
            return []
        if self.kind == "trace":
            follow = self._trace_row(self.trace_position, now_ns)
            self.trace_position += follow is not None
            return [follow] if follow is not None else []
        follow = self._next_synthetic(now_ns)
        return [follow] if follow is not None else []
