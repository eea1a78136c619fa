"""Read an Azure LLM inference trace (CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`) into trace rows.

The Azure public dataset names no prompt content, so no two requests share a block unless the config
declares a prefix they all start with: `traffic.source.shared_prefix_tokens` (its whole blocks get the
same hash ids in every row; every other block its own).  TIMESTAMP is the dataset's
`YYYY-MM-DD HH:MM:SS.fffffff` (any number of fraction digits, read exactly) or a number of seconds;
arrivals are relative to the first row.  Every problem names its file:line:col (the field's column).
"""
from __future__ import annotations

import gzip
import zlib
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path

from .diagnostics import CompileError, Diagnostic, NamedBy
from .spans import Span
from .trace_table import TraceTable

HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MAX_TOKENS = 2 ** 31 - 1
MAX_REPORTED = 20
MAX_TRACE_BYTES = 4 * 1024 ** 3


def _timestamp_ns(text: str) -> int:
    """ns since the epoch (a date-time, UTC) or of a number of seconds; ValueError if neither."""
    try:
        seconds = Decimal(text)
    except InvalidOperation:
        seconds = None
    if seconds is not None:
        if not seconds.is_finite() or seconds < 0:
            raise ValueError(text)
        return int(seconds * 10 ** 9)
    whole, _, fraction = text.partition(".")
    if fraction and not fraction.isdigit():
        raise ValueError(text)
    moment = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    nanos = int((fraction + "0" * 9)[:9]) if fraction else 0
    return int(moment.timestamp()) * 10 ** 9 + nanos


def _fields(line: str) -> list[tuple[int, str]]:
    """(1-based column, stripped text) of each comma-separated field."""
    out, col = [], 1
    for part in line.split(","):
        out.append((col + len(part) - len(part.lstrip()), part.strip()))
        col += len(part) + 1
    return out


def _text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as handle:
            data = handle.read(MAX_TRACE_BYTES + 1)
    else:
        data = path.read_bytes()
    if len(data) > MAX_TRACE_BYTES:
        raise OSError(f"it holds more than {MAX_TRACE_BYTES} bytes")
    return data.decode("utf-8-sig")


def read_azure(path: Path, block_size: int, shared_prefix: int, speedup: float, named_by: NamedBy) -> TraceTable:
    """The rows of one Azure CSV trace; CompileError with every problem (up to a bound)."""
    def problem(code: str, line: int, col: int, field: str, message: str, hint: str) -> Diagnostic:
        return Diagnostic(code, f"/{field}" if field else "", message, hint, span=Span(line, col), source=str(path),
                          named_by=named_by)

    try:
        text = _text(path)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
        raise CompileError([problem("TRACE-FILE", 1, 1, "", f"cannot read the trace: {error}",
                                    "check `traffic.source.paths` (relative to the config file)")]) from None
    lines = text.splitlines()
    header = tuple(f for _, f in _fields(lines[0])) if lines else ()
    if header != HEADER:
        raise CompileError([problem("TRACE-ROW", 1, 1, "", f"the header is {','.join(header)!r}, not "
                                    f"{','.join(HEADER)!r}", "an Azure LLM inference trace starts with its header")])
    shared_blocks = shared_prefix // block_size
    rows, problems, first, last, next_id = TraceTable(), [], None, None, shared_blocks
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = _fields(line)
        if len(fields) != 3:
            problems.append(problem("TRACE-ROW", number, 1, "", f"{len(fields)} fields, not 3", "write "
                                    "TIMESTAMP,ContextTokens,GeneratedTokens"))
        else:
            found = _row(fields, problem, number)
            if isinstance(found, Diagnostic):
                problems.append(found)
            elif last is not None and found[0] < last:
                problems.append(problem("TRACE-ROW", number, fields[0][0], "TIMESTAMP", "timestamps must not "
                                        "decrease", "sort the trace by TIMESTAMP"))
            else:
                at, tokens, generated = found
                first = at if first is None else first
                last = at
                blocks = -(-tokens // block_size)
                shared = min(shared_blocks, tokens // block_size)
                ids = list(range(shared)) + list(range(next_id, next_id + blocks - shared))
                next_id += blocks - shared
                rows.append(round((at - first) / speedup), tokens, generated, ids, None)
        if len(problems) >= MAX_REPORTED:
            break
    if problems:
        raise CompileError(problems)
    if not len(rows):
        raise CompileError([problem("TRACE-EMPTY", 1, 1, "", "the trace has no rows", "add rows below the header")])
    return rows


def _row(fields, problem, number: int):
    """(timestamp ns, context tokens, generated tokens), or the first problem's diagnostic."""
    (tcol, stamp), *counts = fields
    try:
        at = _timestamp_ns(stamp)
    except ValueError:
        return problem("TRACE-ROW", number, tcol, "TIMESTAMP", f"TIMESTAMP {stamp!r} is neither "
                       "`YYYY-MM-DD HH:MM:SS.fff` nor a number of seconds >= 0", "fix the timestamp")
    values = []
    for (col, value), name in zip(counts, HEADER[1:]):
        if not value.isdigit() or not 1 <= int(value) <= MAX_TOKENS:
            return problem("TRACE-ROW", number, col, name, f"{name} must be an integer from 1 to {MAX_TOKENS}",
                           f"fix {name}")
        values.append(int(value))
    return at, values[0], values[1]
