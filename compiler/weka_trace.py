"""Read an AgentX (Weka) trace into plays of dependent requests, every problem with its file:line:col.

A play is one JSON object: `{id, block_size, hash_id_scope, requests}`, each request `{t (s), type, in,
out, hash_ids, api_time (s)}` or a subagent marker `{t, type: subagent, agent_id, requests}`.  A `.jsonl`
file holds one play per line, a `.json` file one play or a list of them, a folder every such file in it.
Dependencies follow AISimulate's replay of the format (docs/replay/workloads.md, and its runs of the
spec's fixtures, reference-facts "Agentic traffic"): the agent's requests that extend its own prefix run
one after another, each `t - (t_prev + api_time_prev)` after the previous one (or the subagent it
started) completes; a subagent's requests likewise, its first after the request that started it; a
top-level request on another prefix (a side conversation) is released at its authored offset from the
play's start.  Subagent request times are absolute or relative to their marker
(`nested_timestamp_basis`; `auto`: relative when any of them is earlier than its marker).
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import orjson

from .agentic_records import AgenticNode, AgenticPlay, AgenticSource
from .diagnostics import CompileError, Diagnostic, NamedBy
from .durations import seconds_to_ns
from .spans import Span

MAX_TOKENS = 2 ** 31 - 1
MAX_REPORTED = 20
MAX_TRACE_BYTES = 4 * 1024 ** 3  # unpacked, as a Mooncake trace's bound
SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz")


def _unpack(path: Path) -> bytes:
    """A gzip file's bytes, read at most MAX_TRACE_BYTES + 1 unpacked (a small bomb never fills memory)."""
    with gzip.open(path, "rb") as handle:
        data = handle.read(MAX_TRACE_BYTES + 1)
    if len(data) > MAX_TRACE_BYTES:
        raise OSError(f"it unpacks to more than {MAX_TRACE_BYTES} bytes")
    return data


class _Problem(Exception):
    def __init__(self, pointer: str, message: str, hint: str):
        super().__init__(message)
        self.pointer, self.message, self.hint = pointer, message, hint


def _int(value, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_TOKENS


def _seconds(item: dict, key: str, pointer: str, default=None) -> int:
    """A time field in ns (exact decimals, so that authored gaps subtract without float error)."""
    value = item.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        raise _Problem(f"{pointer}/{key}", f"`{key}` must be a finite number of seconds >= 0", f"fix `{key}`")
    return seconds_to_ns(value)


def _children(item: dict, pointer: str) -> list:
    requests = item.get("requests")
    if not isinstance(requests, list) or not requests:
        raise _Problem(f"{pointer}/requests", "`requests` must be a non-empty list", "list the requests")
    for position, child in enumerate(requests):
        if not isinstance(child, dict):
            raise _Problem(f"{pointer}/requests/{position}", "a request must be a JSON object", "fix the request")
    return requests


class _Play:
    """One play being flattened: its nodes, the hash-id numbering, the side conversations seen."""

    def __init__(self, name: str, block_size: int, basis: str, number):
        self.name, self.block_size, self.basis, self.number = name, block_size, basis, number
        self.nodes: list[AgenticNode] = []
        self.sides: dict[int, tuple[str, tuple, float]] = {}  # first hash id -> (conversation, waits, end)
        self.t0 = 0  # the play's first request time: authored starts count from it

    def request(self, item: dict, pointer: str, t: float, conversation: str, waits: tuple, delay_s: float):
        for key in ("in", "out"):
            if not _int(item.get(key), 1):
                raise _Problem(f"{pointer}/{key}", f"`{key}` must be an integer from 1 to {MAX_TOKENS}", f"fix `{key}`")
        ids = item.get("hash_ids")
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
            raise _Problem(f"{pointer}/hash_ids", "`hash_ids` must be a list of non-negative integers",
                           "fix `hash_ids`")
        need = -(-item["in"] // self.block_size)
        if len(ids) != need:
            raise _Problem(f"{pointer}/hash_ids", f"{len(ids)} hash_ids for {item['in']} tokens; blocks of "
                           f"{self.block_size} tokens need {need}", "check the play's `block_size`")
        index = len(self.nodes)
        self.nodes.append(AgenticNode(f"{self.name}:request{pointer.replace('/requests/', ':')}", conversation,
                                      item["in"], item["out"], tuple(self.number(h) for h in ids), waits,
                                      max(0, delay_s), max(0, t - self.t0)))
        return (index,), t + _seconds(item, "api_time", pointer, 0)

    def chain(self, items: list, pointer: str, conversation: str, waits: tuple, end: float, origin: int | None):
        """Requests of one agent, one after another after (`waits`, authored `end`); the last's (waits, end)."""
        for position, item in enumerate(items):
            at = f"{pointer}/requests/{position}"
            t = _seconds(item, "t", at) + (origin or 0)
            if item.get("type") == "subagent":
                inner = f"{conversation}:subagent:{position}:{item.get('agent_id', '')}"
                waits, end = self.chain(_children(item, at), at, inner, waits, end, self._origin(t))
            else:
                waits, end = self.request(item, at, t, conversation, waits, t - end)
        return waits, end

    def _origin(self, marker_t: int) -> int | None:
        return marker_t if self.basis == "relative" else None

    def top(self, items: list) -> int:
        """The agent's own requests: its prefix in order, side conversations from the play's start."""
        t0 = self.t0 = min(_seconds(item, "t", f"/requests/{p}") for p, item in enumerate(items))
        waits, end, first = (), t0, None
        for position, item in enumerate(items):
            at = f"/requests/{position}"
            t = _seconds(item, "t", at)
            if item.get("type") == "subagent":
                inner = f"root:subagent:{position}:{item.get('agent_id', '')}"
                waits, end = self.chain(_children(item, at), at, inner, waits, end, self._origin(t))
                continue
            ids = item.get("hash_ids") or [None]
            if first is None or ids[0] == first:
                first = ids[0] if first is None else first
                waits, end = self.request(item, at, t, "root", waits, t - end)
                continue
            conversation, side_waits, side_end = self.sides.get(ids[0], (f"root:side:{len(self.sides)}", (), t0))
            side_waits, side_end = self.request(item, at, t, conversation, side_waits, t - side_end)
            self.sides[ids[0]] = (conversation, side_waits, side_end)
        return t0


def _basis(plays: list, asked: str) -> str:
    if asked != "auto":
        return asked

    def earlier(items) -> bool:
        for item in items:
            if isinstance(item, dict) and item.get("type") == "subagent" and isinstance(item.get("requests"), list):
                marker = item.get("t", 0)
                if any(isinstance(c, dict) and isinstance(c.get("t"), (int, float)) and c["t"] < marker
                       for c in item["requests"]) or earlier(item["requests"]):
                    return True
        return False
    return "relative" if any(earlier(play.get("requests") or ()) for _, _, play in plays) else "absolute"


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
    return [path]


def _raw_plays(path: Path, problem) -> tuple[list[tuple[int, object]], list[Diagnostic]]:
    """(line, play object) of every play in one file that is JSON, and a problem for each line that is not."""
    try:
        data = _unpack(path) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, zlib.error) as error:
        raise CompileError([problem(path, 1, 1, "", f"cannot read the trace: {error.strerror or error}",
                                    "check `traffic.source.paths` (relative to the config file)")]) from None
    kind = Path(path.stem).suffix if path.suffix == ".gz" else path.suffix  # (x.jsonl.gz is JSONL)
    chunks = [(1, data)] if kind == ".json" else \
        [(n, line) for n, line in enumerate(data.split(b"\n"), 1) if line.strip()]
    out, problems = [], []
    for number, chunk in chunks:
        try:
            value = orjson.loads(chunk)
        except orjson.JSONDecodeError as error:
            problems.append(problem(path, number + error.lineno - 1, error.colno, "", f"not valid JSON: {error.msg}",
                                    "fix the line", code="TRACE-ROW"))
            continue
        out += [(number, v) for v in (value if isinstance(value, list) and kind == ".json" else [value])]
    return out, problems


def read_weka(source: dict, base_dir: Path, speedup: float, lanes: int | None) -> AgenticSource:
    """Every play of a `format: weka` source; CompileError with every problem (up to a bound)."""
    def problem(path, line, col, pointer, message, hint, index=0, code=None):
        return Diagnostic(code or ("TRACE-ROW" if pointer else "TRACE-FILE"), pointer, message, hint, span=Span(line, col),
                          source=str(path), named_by=NamedBy(f"/traffic/source/paths/{index}"))

    raw, problems = [], []
    for index, name in enumerate(source["paths"]):
        root = Path(name) if Path(name).is_absolute() else base_dir / name
        for path in _files(root):
            try:
                found, bad = _raw_plays(path, problem)
            except CompileError as error:
                problems += error.diagnostics
                continue
            raw += [(path, index, line, play) for line, play in found]
            problems += bad
    if not raw and not problems:
        problems.append(problem(base_dir / source["paths"][0], 1, 1, "", "the trace has no play",
                                "an AgentX trace holds one play (a JSON object) per line"))
    numbering: dict = {}
    basis = _basis([(p, i, play) for p, i, _, play in raw if isinstance(play, dict)],
                   source.get("nested_timestamp_basis", "auto"))
    plays, block_size = [], source.get("block_size")
    for number, (path, index, line, play) in enumerate(raw):
        try:
            if not isinstance(play, dict):
                raise _Problem("/", "a play must be a JSON object", "write one play object per line")
            size = play.get("block_size", block_size)
            if not _int(size, 1) or (block_size is not None and size != block_size):
                raise _Problem("/block_size", f"the play's block_size {size!r} is not the source's {block_size!r}",
                               "give every play, and `traffic.source.block_size`, the same block size")
            block_size = size
            scope = play.get("hash_id_scope", "local")
            if scope not in ("local", "global"):
                raise _Problem("/hash_id_scope", "`hash_id_scope` must be `local` or `global`", "fix the scope")
            key = number if scope == "local" else -1
            flat = _Play(str(play.get("id", number)), size, basis,
                         lambda h, key=key: numbering.setdefault((key, h), len(numbering)))
            t0 = flat.top(_children(play, ""))
            plays.append(AgenticPlay(flat.name, round(t0 / speedup), tuple(_scaled(n, speedup) for n in flat.nodes)))
        except _Problem as bad:
            problems.append(problem(path, line, 1, bad.pointer, bad.message, bad.hint, index))
            if len(problems) >= MAX_REPORTED:
                break
    if problems:
        raise CompileError(problems)
    first = min(play.start_ns for play in plays)
    plays = [AgenticPlay(p.name, p.start_ns - first, p.nodes) for p in plays]
    return AgenticSource(block_size, tuple(plays), lanes, basis)


def _scaled(node: AgenticNode, speedup: float) -> AgenticNode:
    if speedup == 1.0:
        return node
    return AgenticNode(node.name, node.conversation, node.input_length, node.output_length, node.hash_ids,
                       node.waits_for, round(node.delay_ns / speedup), round(node.authored_ns / speedup))
