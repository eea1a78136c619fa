"""The work a replay of a finished plan would do, estimated before it runs, and the limit on it.

A config can be valid in every field and still ask for a replay that runs for
hours (a million requests of a million tokens each).  The estimate counts the
replay's steps: every prompt block a request looks up and fills (its prompt
tokens over the engine's block size) and every output token it decodes, summed
over requests (a session's turn re-reads its whole history, so a turn's prompt
is every earlier turn's tokens plus its own), plus a fixed amount per rank
built.  It is known from the plan alone: every traffic source has a request
count (or a finite list) once the rules passed.  `check` turns an estimate past
the limit into a diagnostic at the field that sets the count, naming the
estimate, the limit and `--max-work`.

The default limit is some minutes of replay on one core of a small machine
(measured: between 0.7 and 5 million steps a second, the low end for sparse
open-loop traffic whose every pass is its own); `--max-work` raises it when a
long run is meant.
"""
from __future__ import annotations

from itertools import islice

from . import work_time
from .diagnostics import Diagnostic
from .opal_records import RateStage, TraceStage
from .plan_records import ReplayPlan, RequestListSource, SessionSource, SyntheticSource, TraceSource
from .trace_table import TraceTable

DEFAULT_MAX_WORK = 10**9
WORK_PER_RANK = 10_000  # building a rank and stepping it through the run, in steps
CODE = "WORK-LIMIT"


def _traffic(plan: ReplayPlan) -> tuple[int, int, int, str]:
    """(requests, prompt tokens, output tokens, the pointer of the field that sets how many) of the traffic."""
    traffic = plan.traffic
    source = traffic.source
    if plan.opal is not None:
        return _opal(plan.opal)
    if isinstance(source, SyntheticSource):
        count = traffic.request_limit or 0
        return count, count * source.input_tokens, count * source.output_tokens, "/traffic/stop/requests"
    if isinstance(source, SessionSource):
        sessions, turns = traffic.session_limit or 0, source.turns
        per_turn = source.new_input_tokens_per_turn + source.output_tokens_per_turn
        # turn k's prompt: the k - 1 turns before it and its own new input
        prompt = turns * source.new_input_tokens_per_turn + per_turn * turns * (turns - 1) // 2
        return sessions * turns, sessions * prompt, sessions * turns * source.output_tokens_per_turn, \
            "/traffic/stop/sessions"
    if isinstance(source, TraceSource):
        rows = source.rows
        count = len(rows) if traffic.request_limit is None else min(len(rows), traffic.request_limit)
        totals = rows.token_totals(count) if isinstance(rows, TraceTable) else _lengths(islice(rows, count))
        return (count, *totals, "/traffic/source/paths")
    if isinstance(source, RequestListSource):
        listed = source.requests
        return (len(listed), sum(r.input_tokens for r in listed), sum(r.output_tokens for r in listed),
                "/traffic/source/requests")
    return 0, 0, 0, "/traffic"


def _lengths(rows) -> tuple[int, int]:
    """(prompt tokens, output tokens) of trace rows, in one pass (a million-row trace is not copied)."""
    prompt = output = 0
    for row in rows:
        prompt += row.input_length
        output += row.output_length
    return prompt, output


def _opal(opal) -> tuple[int, int, int, str]:
    count = prompt = output = 0
    for stage in opal.stages:
        if isinstance(stage, RateStage):  # its largest draws
            count += stage.total_requests
            prompt += stage.total_requests * stage.prompt_max
            output += stage.total_requests * stage.output_max
        elif isinstance(stage, TraceStage):
            count += len(stage.rows)
            stage_prompt, stage_output = _lengths(stage.rows)
            prompt += stage_prompt
            output += stage_output
        else:  # otel sessions: each turn's prompt holds the session's history
            for session in stage.sessions:
                history = 0
                for turn in session.turns:
                    history += len(turn.prompt_ids)
                    prompt += history
                    output += len(turn.output_ids)
                    history += len(turn.output_ids)
                    count += 1
    return count, prompt, output, "/workload/stages"


def estimate(plan: ReplayPlan) -> tuple[int, str, str]:
    """(steps, how they add up in words, the pointer to blame) of replaying `plan`."""
    count, prompt, output, pointer = _traffic(plan)
    block = min((role.block_size for role in plan.roles), default=16)
    ranks = sum(max(n for _, n in role.replica_steps) * role.attention_data for role in plan.roles)
    steps = -(-prompt // block) + output + ranks * WORK_PER_RANK
    words = (f"{count:,} requests: {short(prompt)} prompt tokens in {block}-token blocks, {short(output)} output "
             f"tokens; {ranks:,} rank{'s' * (ranks != 1)}")
    timed, timed_words, timed_pointer = work_time.per_second_work(plan, prompt, output)
    if timed_pointer is not None:  # an opal run: its outputs and checks grow with its virtual time too
        words += f"; {timed_words}"
        if timed > steps:
            pointer = timed_pointer
        steps += timed
    return steps, words, pointer


def check(plan: ReplayPlan, limit: int) -> list[Diagnostic]:
    """A WORK-LIMIT diagnostic when replaying `plan` would take more than `limit` steps, else none."""
    steps, words, pointer = estimate(plan)
    if steps <= limit:
        return []
    field = pointer.rsplit("/", 1)[-1]
    advice = f"or check `{field}`: a value this small makes the run span that much virtual time" \
        if field in work_time.SLOW_FIELDS else \
        "or ask for fewer or shorter requests"
    return [Diagnostic(CODE, pointer, f"the replay would take about {short(steps)} steps ({words}), more than "
                       f"the work limit of {short(limit)} steps",
                       f"pass `--max-work {_round_up(steps)}` if a run this long is meant (roughly a million steps "
                       f"a second), {advice}")]


def short(amount: int) -> str:
    """2300000000 as `2.3e9`; amounts under a million as they are."""
    if amount < 10**6:
        return f"{amount:,}"
    mantissa, exponent = f"{amount:.3g}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _round_up(amount: int) -> str:
    """`amount` rounded up to two significant digits, as a user would type it (e.g. 2.4e9)."""
    digits = len(str(amount)) - 2
    if digits <= 0:
        return str(amount)
    return f"{-(-amount // 10**digits) / 10:g}e{digits + 1}"
