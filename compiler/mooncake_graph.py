"""Read `mooncake-delta` and `agentic_mooncake` JSONL traces into plays of dependent requests.

Both formats are Mooncake rows (`input_length`/`input_tokens`, `output_length`/`output_tokens`, `hash_ids`,
`timestamp`/`created_time` in ms, `session_id`), replayed as AISimulate documents them
(docs/replay/workloads.md):

- `mooncake-delta`: rows with one `session_id` are the turns of a session, in file order.  The first row is the
  whole first prompt, each later row only the new input: its prompt is the previous prompt, the previous
  turn's output and this delta.  A later turn starts `delay` ms (`delay_ms`) after the previous one completes
  (without a delay: its timestamp's gap to the previous row's).  Its complete trace blocks of the previous
  prompt keep their ids; the rest (the previous prompt's partial block, the output, the delta) are new blocks
  of this session.  A row without `session_id` is a one-turn session.
- `agentic_mooncake`: every row is a request node with a unique `request_id`; `wait_for` lists the nodes that
  must complete first, and the node starts `delay` + `tool_wait_ms` after the last of them.  A node that waits
  for nothing starts at its timestamp (0 without one).  As AISimulate 0.13 groups them (its loader's
  `legacy-play` components, measured in reference-facts §35): the nodes joined by `wait_for` form one play (a
  lane's unit), whatever their `session_id` (two roots of one session that nothing joins are two plays), named
  `legacy-play:<root>` after its earliest root (by timestamp, then request id); the corpus (the order lanes take
  plays in) is in play-name order, not file or time order.  A node's conversation is its `session_id`.

Every problem is reported at file:line:col, the column of the field it is about.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import orjson

from .agentic_records import AgenticNode, AgenticPlay, AgenticSource
from .diagnostics import CompileError, Diagnostic, NamedBy
from .durations import ms_to_ns
from .spans import Span
from .weka_trace import MAX_REPORTED, MAX_TOKENS, _unpack

MAX_MS = 1e12  # about 30 years: a larger time is a unit mistake
SESSION = "TRACE-SESSION"  # a session's turns out of order (mooncake-delta)
DEPENDENCY = "TRACE-DEPENDENCY"  # a request graph that cannot run (agentic_mooncake): ids, waits, cycles


class _Bad(Exception):
    def __init__(self, field: str, message: str, hint: str, code: str = "TRACE-ROW"):
        super().__init__(message)
        self.field, self.message, self.hint, self.code = field, message, hint, code


def _count(row: dict, names: tuple[str, ...], required: bool, low: int = 1) -> int | None:
    for name in names:
        if name in row:
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_TOKENS:
                raise _Bad(name, f"`{name}` must be an integer from {low} to {MAX_TOKENS}", f"fix `{name}`")
            return value
    if required:
        raise _Bad("", f"missing `{names[0]}`", f"give every row `{names[0]}`")
    return None


def _ms(row: dict, names: tuple[str, ...]) -> tuple[str, float] | None:
    """(field, milliseconds) of the first of `names` the row has, or None."""
    for name in names:
        if name in row:
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_MS:
                raise _Bad(name, f"`{name}` must be a finite number of milliseconds from 0 to {MAX_MS:g}",
                           f"fix `{name}`")
            return name, value
    return None


def _hash_ids(row: dict, block_size: int) -> tuple[int, list[int]]:
    """(input tokens, hash ids) of a row: the input defaults to what its hash ids hold."""
    ids = row.get("hash_ids")
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
        raise _Bad("hash_ids", "`hash_ids` must be a list of non-negative integers", "fix `hash_ids`")
    tokens = _count(row, ("input_length", "input_tokens"), False)
    if tokens is None:
        if not ids:
            raise _Bad("hash_ids", "a row without `input_length` needs hash ids", "give `input_length`")
        tokens = len(ids) * block_size
    need = -(-tokens // block_size)
    if len(ids) != need:
        raise _Bad("hash_ids", f"{len(ids)} hash_ids for {tokens} tokens; blocks of {block_size} tokens need {need}",
                   "check `traffic.source.block_size` against the trace")
    return tokens, ids


class _Rows:
    """The JSON rows of one source's files, each with where it is, and the problems found so far."""

    def __init__(self, source: dict, base_dir: Path):
        self.rows: list[tuple[Path, int, int, bytes, dict]] = []  # (file, path index, line, raw line, row)
        self.problems: list[Diagnostic] = []
        for index, name in enumerate(source["paths"]):
            path = Path(name) if Path(name).is_absolute() else base_dir / name
            try:
                data = _unpack(path) if path.suffix == ".gz" else path.read_bytes()
            except (OSError, EOFError, zlib.error) as error:  # (a damaged gzip file: BadGzipFile is an OSError)
                self.add(path, index, 1, 1, "", f"cannot read the trace: {getattr(error, 'strerror', None) or error}",
                         "check `traffic.source.paths` (relative to the config file)", "TRACE-FILE")
                continue
            for number, line in enumerate(data.split(b"\n"), 1):
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError as error:
                    self.add(path, index, number, error.colno, "", f"not valid JSON: {error.msg}", "fix the line")
                    continue
                if not isinstance(row, dict):
                    self.add(path, index, number, 1, "", "a trace row must be a JSON object", "one object per line")
                    continue
                self.rows.append((path, index, number, line, row))
        if not self.rows and not self.problems:
            self.add(base_dir / source["paths"][0], 0, 1, 1, "", "the trace has no rows",
                     "write one JSON object per line", "TRACE-EMPTY")

    def add(self, path: Path, index: int, line: int, col: int, field: str, message: str, hint: str,
            code: str = "TRACE-ROW") -> None:
        self.problems.append(Diagnostic(code, f"/{field}" if field else "", message, hint, span=Span(line, col),
                                        source=str(path), named_by=NamedBy(f"/traffic/source/paths/{index}")))

    def bad(self, position: int, error: _Bad) -> None:
        path, index, line, raw, _ = self.rows[position]
        at = raw.find(f'"{error.field}"'.encode()) if error.field else -1
        self.add(path, index, line, at + 1 if at >= 0 else 1, error.field, error.message, error.hint, error.code)

    def check(self) -> None:
        if self.problems:
            raise CompileError(self.problems[:MAX_REPORTED])


def _released(plays: list[AgenticPlay], in_start_order: bool = True) -> list[AgenticPlay]:
    """The plays (in start order, file order among equals; or as given), their starts from the first one."""
    if in_start_order:
        plays = sorted(plays, key=lambda play: play.start_ns)
    first = min((play.start_ns for play in plays), default=0)
    return [AgenticPlay(play.name, play.start_ns - first, play.nodes) for play in plays]


def read_delta(source: dict, base_dir: Path, speedup: float) -> AgenticSource:
    """The sessions of a `mooncake-delta` trace, each a play whose turns wait for the one before."""
    block_size = source["block_size"]
    found = _Rows(source, base_dir)
    numbering: dict[int, int] = {}
    sessions: dict[str, dict] = {}  # session -> its play being built
    order: list[str] = []
    for position, (_, _, line, _, row) in enumerate(found.rows):
        try:
            output = _count(row, ("output_length", "output_tokens"), True)
            tokens, ids = _hash_ids(row, block_size)
            stamp = _ms(row, ("timestamp", "created_time"))
            delay = _ms(row, ("delay", "delay_ms"))
            session = row.get("session_id")
            if session is not None and not isinstance(session, (str, int)) or isinstance(session, bool):
                raise _Bad("session_id", "`session_id` must be a string or an integer", "fix `session_id`")
            key = f"request_{line}" if session is None else str(session)
            play = sessions.get(key)
            if play is None:
                if stamp is None:
                    raise _Bad("", "a session's first row needs `timestamp`", "give the first turn its arrival (ms)",
                               SESSION)
                if delay is not None and delay[1] != 0:
                    raise _Bad(delay[0], f"`{delay[0]}` must be omitted or 0 on a session's first row",
                               "give the first turn a `timestamp` instead", SESSION)
                full = tuple(numbering.setdefault(h, len(numbering)) for h in ids)
                play = sessions[key] = {"start": stamp[1], "last": stamp[1], "nodes": [], "ids": full,
                                        "tokens": tokens, "output": output}
                order.append(key)
                gap = 0.0
            else:
                gap = delay[1] if delay is not None else (stamp[1] - play["last"] if stamp is not None else 0.0)
                if gap < 0:
                    raise _Bad(stamp[0], "a later turn's timestamp is before the previous row's",
                               "give the turn a `delay` (ms after the previous turn completes)", SESSION)
                kept = play["tokens"] // block_size
                total = play["tokens"] + play["output"] + tokens
                fresh = -(-total // block_size) - kept
                if total > MAX_TOKENS:
                    raise _Bad("hash_ids", f"the session's prompt grows past {MAX_TOKENS} tokens", "shorten the session")
                new = tuple(range(len(numbering), len(numbering) + fresh))  # ids no other block has
                for _ in range(fresh):
                    numbering[("fresh", len(numbering))] = len(numbering)
                play.update(ids=play["ids"][:kept] + new, tokens=total, output=output)
            if stamp is not None:
                play["last"] = stamp[1]
            index = len(play["nodes"])
            play["nodes"].append(AgenticNode(str(row.get("request_id") or f"{key}:turn{index}"), "root", play["tokens"],
                                             output, play["ids"], (index - 1,) if index else (),
                                             ms_to_ns(gap, speedup), ms_to_ns(play["last"] - play["start"], speedup)))
        except _Bad as error:
            found.bad(position, error)
            if len(found.problems) >= MAX_REPORTED:
                break
    found.check()
    plays = [AgenticPlay(key, ms_to_ns(sessions[key]["start"], speedup),
                         tuple(sessions[key]["nodes"])) for key in order]
    return AgenticSource(block_size, tuple(_released(plays)), None, "absolute", input_format="mooncake-delta")


def read_agentic_mooncake(source: dict, base_dir: Path, speedup: float) -> AgenticSource:
    """The request nodes of an `agentic_mooncake` trace, grouped into plays by their dependencies."""
    block_size = source["block_size"]
    found = _Rows(source, base_dir)
    numbering: dict[int, int] = {}
    parsed, where = [], {}  # (id, tokens, output, ids, root ms, delay ms, waits, session); request id -> position
    for position, (_, _, _, _, row) in enumerate(found.rows):
        try:
            name = row.get("request_id")
            if not isinstance(name, (str, int)) or isinstance(name, bool) or name == "":
                raise _Bad("request_id" if "request_id" in row else "", "every row needs a non-empty `request_id`",
                           "give each request node a unique `request_id`", DEPENDENCY)
            if str(name) in where:
                raise _Bad("request_id", f"`request_id` {name!r} is also the id of the row at line "
                           f"{found.rows[where[str(name)]][2]}", "give each request node a unique `request_id`", DEPENDENCY)
            output = _count(row, ("output_length", "output_tokens"), True)
            tokens, ids = _hash_ids(row, block_size)
            waits = row.get("wait_for", [])
            if not isinstance(waits, list) or not all(isinstance(w, (str, int)) and not isinstance(w, bool)
                                                      for w in waits):
                raise _Bad("wait_for", "`wait_for` must be a list of request ids", "fix `wait_for`")
            stamp = _ms(row, ("timestamp", "created_time"))
            delay = _ms(row, ("delay", "delay_ms"))
            tool = _ms(row, ("tool_wait_ms",))
            wait_ms = (delay[1] if delay else 0.0) + (tool[1] if tool else 0.0)
            where[str(name)] = position
            parsed.append((str(name), tokens, output, tuple(numbering.setdefault(h, len(numbering)) for h in ids),
                           stamp[1] if stamp else 0.0, wait_ms, tuple(str(w) for w in waits), row.get("session_id")))
        except _Bad as error:
            found.bad(position, error)
            parsed.append(None)
    found.check()
    for position, item in enumerate(parsed):  # every id is known now: the dependencies themselves
        for wanted in item[6]:
            if wanted == item[0]:
                found.bad(position, _Bad("wait_for", f"request {item[0]!r} waits for itself", "remove it from `wait_for`", DEPENDENCY))
            elif wanted not in where:
                found.bad(position, _Bad("wait_for", f"`wait_for` names {wanted!r}, which no row's request_id is",
                                         "name request ids of this trace", DEPENDENCY))
    found.check()
    _no_cycle(parsed, where, found)
    return AgenticSource(block_size, tuple(_released(_plays(parsed, where, speedup), in_start_order=False)), None,
                         "absolute", input_format="agentic_mooncake")


def _no_cycle(parsed: list, where: dict, found: _Rows) -> None:
    """Kahn's order over every node; a node left over is on (or after) a cycle: the first such is reported."""
    pending = [len(set(item[6])) for item in parsed]
    dependents: list[list[int]] = [[] for _ in parsed]
    for position, item in enumerate(parsed):
        for wanted in set(item[6]):
            dependents[where[wanted]].append(position)
    ready = [p for p, n in enumerate(pending) if n == 0]
    while ready:
        for follower in dependents[ready.pop()]:
            pending[follower] -= 1
            if pending[follower] == 0:
                ready.append(follower)
    left = [p for p, n in enumerate(pending) if n]
    if left:
        found.bad(left[0], _Bad("wait_for", f"request {parsed[left[0]][0]!r} is on a cycle of `wait_for`",
                                "a request node cannot wait, through others, for itself", DEPENDENCY))
        found.check()


def _plays(parsed: list, where: dict, speedup: float) -> list[AgenticPlay]:
    """One play per group of nodes joined by `wait_for` (AISimulate's `legacy-play:<earliest root>`), in name order."""
    group = list(range(len(parsed)))

    def root(p: int) -> int:
        while group[p] != p:
            group[p] = group[group[p]]
            p = group[p]
        return p
    for position, item in enumerate(parsed):
        for wanted in item[6]:
            group[root(where[wanted])] = root(position)
    members: dict[int, list[int]] = {}
    for position in range(len(parsed)):
        members.setdefault(root(position), []).append(position)
    plays = []
    for positions in sorted(members.values()):
        local = {parsed[p][0]: i for i, p in enumerate(positions)}
        start = min(parsed[p][4] for p in positions if not parsed[p][6])
        nodes = []
        for p in positions:
            name, tokens, output, ids, stamp, wait_ms, waits, session = parsed[p]
            delay = wait_ms if waits else stamp - start
            nodes.append(AgenticNode(name, "root" if session is None else str(session), tokens, output, ids,
                                     tuple(sorted({local[w] for w in waits})), ms_to_ns(delay, speedup),
                                     ms_to_ns(max(0.0, stamp - start), speedup)))
        label = min((parsed[p][4], parsed[p][0]) for p in positions if not parsed[p][6])[1]
        plays.append(AgenticPlay(f"legacy-play:{label}", ms_to_ns(start, speedup), tuple(nodes)))
    return sorted(plays, key=lambda play: play.name)
