"""Traces pass: read and check the trace files a config names, so the runtime gets parsed rows.

A Mooncake trace is one JSON object per line, `{timestamp (ms), input_length, output_length,
hash_ids, session_id?}` with ``len(hash_ids) == ceil(input_length / block_size)`` and
timestamps that never decrease.  A file that cannot be read, holds no row, or has bad rows gives
diagnostics positioned in the trace itself (``file:line``), each also naming the config value
that named the file (`traffic.source.paths[i]`); all problems of a file are reported together
(up to a bound), never a traceback.  Each line is parsed once, with orjson.
"""
from __future__ import annotations

import gzip
import zlib
from itertools import count
from pathlib import Path
from typing import Iterator, Mapping

import orjson

from ..diagnostics import CompileError, Diagnostic, NamedBy, join_pointer
from ..durations import NS_PER_MS, ms_to_ns
from ..spans import Span
from ..spec import Spec
from ..trace_table import TraceTable
from ..azure_trace import read_azure
from ..agentic_load import agentic_source
from ..agentic_records import PLAY_FORMATS

MAX_REPORTED = 20
MAX_TRACE_BYTES = 4 * 1024 ** 3  # a trace larger than this is refused (read lazily, never all of /dev/zero)
MAX_LINE_BYTES = 64 * 1024 ** 2  # a row this long would name millions of blocks: it is refused, not read on
MAX_TOKENS = 2 ** 31 - 1  # as the configs' token fields (schema): more cannot be meant, and would not fit
DEFAULT_BLOCK_SIZE = 512  # the defaults pass's value, for plans written without it


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _all_natural(ids: list) -> bool:
    """Are all of `ids` plain ints >= 0?  (Checked in C: a long trace holds millions of ids; a False sends the row
    to the exact element-wise check, which also accepts int subclasses other than bool.)"""
    return not ids or (set(map(type, ids)) == {int} and min(ids) >= 0)


def _plainly_valid(row, block_size: int) -> bool:
    """Is the row valid on its face: plain ints (a number for the timestamp) in range, as many ids as blocks?  The
    common case, tested without a call per field (a million-row trace asks a million times); a False sends the row
    to `check_row`, which finds the problem, or none (an int subclass, say)."""
    if type(row) is not dict:
        return False
    timestamp, prompt = row.get("timestamp"), row.get("input_length")
    output, ids = row.get("output_length"), row.get("hash_ids")
    return (type(timestamp) is int or type(timestamp) is float) and timestamp >= 0 and type(prompt) is int \
        and type(output) is int and 1 <= prompt <= MAX_TOKENS and 1 <= output <= MAX_TOKENS and type(ids) is list \
        and len(ids) == -(-prompt // block_size) and _all_natural(ids)


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
        if not _is_int(row[field]) or not 1 <= row[field] <= MAX_TOKENS:
            return field, f"`{field}` must be an integer from 1 to {MAX_TOKENS} (2^31 - 1)", f"fix `{field}`"
    ids = row["hash_ids"]
    if not isinstance(ids, list) or not (_all_natural(ids) or all(_is_int(h) and h >= 0 for h in ids)):
        return "hash_ids", "`hash_ids` must be a list of non-negative integers", "fix `hash_ids`"
    expected = -(-row["input_length"] // block_size)
    if len(ids) != expected:
        return ("hash_ids", f"{len(ids)} hash_ids for {row['input_length']} tokens; blocks of {block_size} tokens "
                f"need {expected}", "check `traffic.source.block_size` against the trace")
    return None


def _lines(handle, problem) -> Iterator[tuple[int, bytes]]:
    """(number, line) of an open trace, read a line at a time (never the whole file at once): each line at most
    MAX_LINE_BYTES, all of them at most MAX_TRACE_BYTES (else CompileError)."""
    total = 0
    for number in count(1):
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        total += len(line)
        if total > MAX_TRACE_BYTES:
            raise CompileError([problem("TRACE-FILE", 1, "", f"the trace is larger than {MAX_TRACE_BYTES} bytes",
                                        "split it, or replay a part of it")])
        if len(line) > MAX_LINE_BYTES:
            raise CompileError([problem("TRACE-ROW", number, "", f"the line is longer than {MAX_LINE_BYTES} bytes",
                                        "a Mooncake trace holds one JSON object per line")])
        yield number, line


def _unpacked(lines, problem) -> Iterator[tuple[int, bytes]]:
    """The lines, a damaged gzip file a TRACE-FILE diagnostic (at the line it broke in), not a traceback."""
    number = 1
    try:
        for number, line in lines:
            yield number, line
    except (OSError, EOFError, zlib.error) as error:  # (BadGzipFile is an OSError)
        raise CompileError([problem("TRACE-FILE", number, "", f"cannot unpack the gzip trace: {error}",
                                    "check the file (gzip -t), or give it unpacked")]) from None


def _decode_error(line: bytes) -> str:
    """orjson's message for a line that is not JSON, its positions counted within the row (without the line end)."""
    try:
        orjson.loads(line.rstrip(b"\r\n"))
    except orjson.JSONDecodeError as error:
        return str(error)
    return "the line is not one JSON value"  # (not reached: a line end is JSON whitespace)


def read_trace(path: Path, block_size: int, speedup: float = 1.0, named_by: NamedBy | None = None) -> TraceTable:
    """The checked rows of one trace file, timestamps in ns after `speedup`; CompileError on any problem."""
    def problem(code: str, line: int, field: str, message: str, hint: str) -> Diagnostic:
        return Diagnostic(code, f"/{field}" if field else "", message, hint, span=Span(line, 1), source=str(path),
                          named_by=named_by)

    try:
        handle = gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")  # (gzip: read as it unpacks)
    except OSError as error:
        raise CompileError([problem("TRACE-FILE", 1, "", f"cannot read the trace: {error.strerror or error}",
                                    "check `traffic.source.paths` (relative to the config file)")]) from None
    rows, problems, last_timestamp = TraceTable(), [], 0.0
    loads, append, whole_ms = orjson.loads, rows.append, speedup == 1  # (per row of a million-row trace)
    with handle:
        for number, line in _unpacked(_lines(handle, problem), problem):
            try:
                row = loads(line)  # (a line's end is JSON whitespace)
            except orjson.JSONDecodeError:
                if not line.strip():
                    continue
                found = ("", f"not valid JSON: {_decode_error(line)}", "fix the line")
            else:
                found = None if _plainly_valid(row, block_size) else check_row(row, block_size)
                if found is None and row["timestamp"] < last_timestamp:
                    found = ("timestamp", "timestamps must not decrease", "sort the trace by timestamp")
            if found:
                problems.append(problem("TRACE-ROW", number, *found))
                if len(problems) >= MAX_REPORTED:  # (the first ones say what to fix; a million would say nothing more)
                    break
                continue
            last_timestamp = row["timestamp"]
            append(last_timestamp * NS_PER_MS if whole_ms and type(last_timestamp) is int  # (ms_to_ns's exact case)
                   else ms_to_ns(last_timestamp, speedup), row["input_length"], row["output_length"], row["hash_ids"],
                   row.get("session_id"))
    if problems:
        raise CompileError(problems)
    if not len(rows):
        raise CompileError([problem("TRACE-EMPTY", 1, "", "the trace has no rows",
                                    "a Mooncake trace holds one JSON object per line")])
    return rows


def read_traces(traffic: Mapping, base_dir: Path) -> TraceTable:
    """The rows of every file of a `trace` source (paths relative to `base_dir`), in file order."""
    rows = TraceTable()
    source = traffic.get("source", {})
    if source.get("type") != "trace":  # also a valid plan whose traffic has no source
        return rows
    block_size = source.get("block_size", DEFAULT_BLOCK_SIZE)
    speedup = traffic.get("load", {}).get("speedup", 1.0)
    if source.get("format") in PLAY_FORMATS:  # plays of dependent requests, not rows
        return agentic_source(source, traffic.get("load", {}), base_dir, speedup)
    problems = []
    for index, name in enumerate(source["paths"]):
        path = Path(name) if Path(name).is_absolute() else base_dir / name
        named_by = NamedBy(join_pointer("traffic", "source", "paths", index))
        try:
            if source.get("format") == "azure":  # (CSV rows: no prefix ids, a declared shared prefix)
                found = read_azure(path, block_size, source.get("shared_prefix_tokens", 0), speedup, named_by)
            else:
                found = read_trace(path, block_size, speedup, named_by)
        except CompileError as error:
            problems.extend(error.diagnostics)
            continue
        if len(rows):
            rows.extend(found)
        else:
            rows = found
    if problems:
        raise CompileError(problems)
    return rows


def run(spec: Spec, base_dir: Path) -> TraceTable:
    return read_traces(spec.doc.get("traffic", {}), base_dir)
