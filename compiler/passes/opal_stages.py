"""Traces pass, opal part: read and check the files of an opal config's `trace` and `otel` stages.

`trace`: Mooncake rows `{timestamp, input_length, output_length, hash_ids}`; a hash id stands for
`chunk_size` tokens (the last may be shorter: ``len(hash_ids) == ceil(input_length / chunk_size)``);
`timestamp x multiplier_to_sec` seconds, as ns; cut to `total_requests` (-1: all).
`otel` (pretokenized): one session per line, `{trace_id, turns: [{start_time, end_time (ISO 8601),
input_length, output_length, hash_ids (the prompt's token ids), output_token_ids, ...}]}`; the id lists
must have the lengths given; times are relative to the file's earliest start, times `multiplier_to_sec`.
Paths are relative to the config's folder, else the working directory.  Problems are positioned in the
stage file (`file:line`) and name the config value that names it; never a traceback.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Iterator

import orjson
from pyrsistent import thaw

from ..diagnostics import CompileError, Diagnostic, NamedBy, join_pointer
from ..durations import scaled_to_ns
from ..load import read_bounded
from ..opal_records import OtelSession, OtelTurn
from ..plan_records import TraceRow
from ..spans import Span
from ..spec import Spec
from .traces import MAX_REPORTED, MAX_TOKENS, MAX_TRACE_BYTES, check_row

Problem = tuple[str, str, str]  # (field pointer, message, hint)


def stage_path(name: str, base_dir: Path) -> Path:
    path = Path(name)
    if path.is_absolute():
        return path
    beside = base_dir / path
    return beside if beside.exists() or not (Path.cwd() / path).exists() else Path.cwd() / path


class StageFile:
    """The lines of one stage file, and the diagnostics about them."""

    def __init__(self, path: Path, named_by: NamedBy):
        self.path, self.named_by, self.problems = path, named_by, []

    def problem(self, line: int, field: str, message: str, hint: str, code: str = "TRACE-ROW") -> None:
        self.problems.append(Diagnostic(code, field, message, hint, span=Span(line, 1), source=str(self.path),
                                        named_by=self.named_by))

    def full(self) -> bool:
        return len(self.problems) >= MAX_REPORTED

    def rows(self) -> Iterator[tuple[int, object]]:
        """(line number, parsed JSON) of each non-empty line; lines that are not JSON are problems."""
        try:
            data = read_bounded(self.path, MAX_TRACE_BYTES)
        except OSError as error:
            self.problem(1, "", f"cannot read the stage file: {error.strerror or error}",
                         "check `trace_file` (relative to the config file, else the working directory)", "TRACE-FILE")
            return
        if len(data) > MAX_TRACE_BYTES:
            self.problem(1, "", f"the stage file is larger than {MAX_TRACE_BYTES} bytes", "split it", "TRACE-FILE")
            return
        for number, line in enumerate(data.splitlines(), start=1):
            if self.full():
                return
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line)
            except orjson.JSONDecodeError as error:
                self.problem(number, "", f"not valid JSON: {error}", "fix the line")

    def finish(self, items: list, what: str) -> None:
        if not self.problems and not items:
            self.problem(1, "", f"the stage file has no {what}", "write one JSON object per line", "TRACE-EMPTY")
        if self.problems:
            raise CompileError(self.problems)


def read_trace_stage(file: StageFile, chunk_size: int, multiplier: float, total: int) -> tuple[TraceRow, ...]:
    rows, last = [], 0
    for number, row in file.rows():
        found = check_row(row, chunk_size)
        if found and found[0] == "hash_ids" and "need" in found[1]:
            found = (found[0], found[1], "each hash id stands for the stage's `chunk_size` tokens (default 512); "
                     "check it against the trace")
        if found is None and row["timestamp"] < last:
            found = ("timestamp", "timestamps must not decrease", "sort the trace by timestamp")
        if found:
            field, message, hint = found
            file.problem(number, f"/{field}" if field else "", message, hint)
            continue
        last = row["timestamp"]
        rows.append(TraceRow(scaled_to_ns(last, multiplier), row["input_length"], row["output_length"],
                             tuple(row["hash_ids"]), row.get("session_id")))
    file.finish(rows, "rows")
    return tuple(rows if total == -1 else rows[:total])


def _ids(value, length, name: str) -> str | None:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                              for i in value):
        return f"`{name}` must be a list of non-negative integers"
    if len(value) != length:
        return f"{len(value)} {name} for a length of {length}"
    return None


def _turn_problem(turn) -> Problem | tuple[datetime, datetime, dict]:
    if not isinstance(turn, dict):
        return "", "a turn must be a JSON object", "write each turn as an object"
    for field in ("start_time", "end_time", "input_length", "output_length", "hash_ids", "output_token_ids"):
        if field not in turn:
            return f"/{field}", f"missing `{field}`", "pretokenized turns need start_time, end_time, input_length, " \
                "output_length, hash_ids and output_token_ids"
    try:
        start, end = datetime.fromisoformat(turn["start_time"]), datetime.fromisoformat(turn["end_time"])
        backwards = end < start
    except (TypeError, ValueError):
        return "/start_time", "`start_time` and `end_time` must be ISO 8601 times of one kind", "fix the times"
    if backwards:
        return "/end_time", "`end_time` is before `start_time`", "fix the times"
    for field, low in (("input_length", 1), ("output_length", 1)):
        value = turn[field]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_TOKENS:
            return f"/{field}", f"`{field}` must be an integer from {low} to {MAX_TOKENS}", f"fix `{field}`"
    for field, length in (("hash_ids", "input_length"), ("output_token_ids", "output_length")):
        wrong = _ids(turn[field], turn[length], field)
        if wrong:
            return f"/{field}", wrong, f"`{field}` holds one token id per token of `{length}`"
    return start, end, turn


def read_otel_stage(file: StageFile, multiplier: float) -> tuple[OtelSession, ...]:
    sessions = []
    for number, line in file.rows():
        if not isinstance(line, dict) or not isinstance(line.get("trace_id"), str) or \
                not isinstance(line.get("turns"), list) or not line["turns"]:
            file.problem(number, "", "a session must be an object with a `trace_id` string and a non-empty `turns` "
                         "list", "write one pretokenized session per line")
            continue
        turns = [_turn_problem(turn) for turn in line["turns"]]
        bad = [(i, t) for i, t in enumerate(turns) if isinstance(t[0], str)]
        for i, (field, message, hint) in bad[:1]:
            file.problem(number, join_pointer("turns", i) + field, message, hint)
        if not bad:
            sessions.append((line["trace_id"], turns))
    file.finish(sessions, "sessions")
    origin = min(start for _, turns in sessions for start, _, _ in turns)

    def offset(moment: datetime) -> int:
        delta = moment - origin
        micros = (delta.days * 86_400 + delta.seconds) * 10 ** 6 + delta.microseconds
        return scaled_to_ns(micros, multiplier, 1000)

    return tuple(OtelSession(trace_id, tuple(OtelTurn(offset(start), offset(end), tuple(turn["hash_ids"]),
                                                       tuple(turn["output_token_ids"])) for start, end, turn in turns))
                 for trace_id, turns in sessions)


def run(spec: Spec, base_dir: Path) -> tuple:
    """The traces pass for an opal config (the pipeline calls it instead of `traces.run`)."""
    return read_stages(thaw(spec.doc["opal"]), base_dir)


def read_stages(opal: dict, base_dir: Path) -> tuple:
    """Per stage of `opal.workload.stages`: its trace rows, its sessions, or None (a rate stage)."""
    out, problems = [], []
    for index, stage in enumerate(opal["workload"]["stages"]):
        params = stage["workload_params"]
        if stage["type"] not in ("trace", "otel"):
            out.append(None)
            continue
        named_by = NamedBy(join_pointer("workload", "stages", index, "workload_params", "trace_file"))
        file = StageFile(stage_path(params["trace_file"], base_dir), named_by)
        try:
            if stage["type"] == "trace":
                out.append(read_trace_stage(file, params["chunk_size"], params["multiplier_to_sec"],
                                            params["total_requests"]))
            else:
                out.append(read_otel_stage(file, params["multiplier_to_sec"]))
        except CompileError as error:
            problems.extend(error.diagnostics)
    if problems:
        raise CompileError(problems)
    return tuple(out)
