"""The recommend ledger: one JSON line per candidate, in candidate-index order, that a re-run resumes from.

Lines are written whole (one unbuffered write of a complete line, then flush), so an interrupted sweep
leaves complete lines and at most a torn last one, which reading drops and the next run rewrites.
Each line carries the hash of the search's config, so a ledger is resumed only by the search that
wrote it: a changed config (other traffic, other domains) starts a new ledger instead of mixing results.
"""
from __future__ import annotations

import os
from pathlib import Path

import orjson
import xxhash


class LedgerMismatch(ValueError):
    """The ledger on disk was written by another search."""


def config_hash(document: dict) -> str:
    """The search's identity: its config with every domain listed, canonical JSON, XXH3-64."""
    return xxhash.xxh3_64_hexdigest(orjson.dumps(document, option=orjson.OPT_SORT_KEYS))


def line(entry: dict) -> bytes:
    return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS) + b"\n"


def read(path: Path, candidates: list[dict], search: str) -> list[dict]:
    """The complete entries already in the ledger (a prefix of the candidates); a torn last line is cut off."""
    if not path.exists():
        return []
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        with open(path, "r+b") as handle:  # drop the torn line now, so appends continue a whole ledger
            handle.truncate(len(complete))
    entries = []
    for number, raw in enumerate(complete.splitlines(), start=1):
        try:
            entry = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise LedgerMismatch(f"{path}: line {number} is not JSON") from None
        index = number - 1
        if not isinstance(entry, dict) or entry.get("search") != search:
            raise LedgerMismatch(f"{path} was written by another search (line {number} has another config "
                                 "hash); pass --overwrite or choose another --output-dir")
        if index >= len(candidates) or entry.get("index") != index or entry.get("knobs") != candidates[index]:
            raise LedgerMismatch(f"{path}: line {number} is not candidate {index} of this search; pass "
                                 "--overwrite or choose another --output-dir")
        entries.append(entry)
    return entries


class Writer:
    """Appends entries to the ledger, each as one whole line, flushed before the next candidate counts."""

    def __init__(self, path: Path, fresh: bool):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(path, "wb" if fresh else "ab", buffering=0)

    def write(self, entry: dict) -> None:
        data = memoryview(line(entry))
        while data:
            written = self.handle.write(data)
            data = data[written:]
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def close(self) -> None:
        self.handle.close()
