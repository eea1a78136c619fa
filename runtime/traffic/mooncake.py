"""Read Mooncake trace files: one JSON object per line, checked row by row.

A row is `{timestamp (ms), input_length, output_length, hash_ids, session_id?}`
with ``len(hash_ids) == ceil(input_length / block_size)``.  Problems become
diagnostics naming the file, line and field; all problems of a file are
reported together (up to a bound), never a traceback.
"""
from __future__ import annotations

from pathlib import Path

import orjson

from ...compiler.diagnostics import CompileError, Diagnostic
from ...compiler.spans import Span

MAX_REPORTED = 20


def _problem(path: str, line: int, field: str, message: str, hint: str) -> Diagnostic:
    pointer = f"/{field}" if field else ""
    return Diagnostic("TRACE-ROW", pointer, message, hint, span=Span(line, 1), source=path)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_row(row, block_size: int) -> tuple[str, str, str] | None:
    """(field, message, hint) of the first problem of a row, or None."""
    if not isinstance(row, dict):
        return "", "a trace row must be a JSON object", "write one object per line"
    for field in ("timestamp", "input_length", "output_length", "hash_ids"):
        if field not in row:
            return field, f"missing `{field}`", "Mooncake rows need timestamp, input_length, output_length, hash_ids"
    timestamp = row["timestamp"]
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not timestamp >= 0:
        return "timestamp", "`timestamp` must be a finite number of milliseconds >= 0", "fix the timestamp"
    for field in ("input_length", "output_length"):
        if not _is_int(row[field]) or row[field] < 1:
            return field, f"`{field}` must be an integer >= 1", f"fix `{field}`"
    ids = row["hash_ids"]
    if not isinstance(ids, list) or not all(_is_int(h) and h >= 0 for h in ids):
        return "hash_ids", "`hash_ids` must be a list of non-negative integers", "fix `hash_ids`"
    expected = -(-row["input_length"] // block_size)
    if len(ids) != expected:
        return ("hash_ids", f"{len(ids)} hash_ids for {row['input_length']} tokens; blocks of {block_size} tokens "
                f"need {expected}", "check `traffic.source.block_size` against the trace")
    return None


def read_trace(path: str | Path, block_size: int) -> list[dict]:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CompileError([Diagnostic("TRACE-FILE", "", f"cannot read the trace: {error.strerror or error}",
                                       "check `traffic.source.paths` (relative to the config file)",
                                       span=Span(1, 1), source=str(path))]) from None
    rows, problems, last_timestamp = [], [], 0.0
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            problems.append(_problem(str(path), number, "", f"not valid JSON: {error}", "fix the line"))
            continue
        problem = check_row(row, block_size)
        if problem is None and row["timestamp"] < last_timestamp:
            problem = ("timestamp", "timestamps must not decrease", "sort the trace by timestamp")
        if problem:
            problems.append(_problem(str(path), number, *problem))
            if len(problems) >= MAX_REPORTED:
                break
            continue
        last_timestamp = row["timestamp"]
        rows.append(row)
    if problems:
        raise CompileError(problems)
    return rows
