"""requests.jsonl written while the replay runs: one canonical JSON line per request, in request index order.

Requests end out of index order (a long prompt finishes after later short
ones), so a record waits here only until every lower index has been written;
what is left when the replay ends (indices of requests that never arrived) is
written in order then.  Records whose turn has come are encoded a chunk at a
time (`Chunks`).  The file is written under a temporary name beside its
destination; `files.write` renames it with the others once all are complete,
and `discard` removes it when the run does not get that far.
"""
from __future__ import annotations

from pathlib import Path

import orjson

from .files import OutputError

SORTED = orjson.OPT_SORT_KEYS
CHUNK = 256  # records encoded at once (a chunk of a million-row trace's records is about 200 KB)


def encode_lines(records: list[dict], first: str | None = None) -> bytes:
    """The records' lines, each `orjson.dumps(record, option=SORTED)` and a newline, from one `orjson.dumps` of the
    list: a record's line is what it is inside the list, and the list's top-level commas are the `},{"K":` before
    each record's first key K (the same K in every record of a chunk: they come from one record function).  The
    split is used only when every record's first key is K and K's separator occurs exactly once between records
    (so no nested field begins with it); otherwise each record is encoded alone.  Same bytes either way (tested),
    about 3 us a record less than one `dumps` per record in a million-request run.  `first`: K, when the record
    function vouches for it (its records have one fixed set of keys, K the least): then it is not checked per
    record (a `min` over a record's keys costs about as much as encoding it)."""
    if not records:
        return b""
    if first is None:
        first = min(records[0], default=None)
        if first is not None and not all(min(record, default=None) == first for record in records):
            first = None
    if first is not None:
        name = orjson.dumps(first) + b":"  # (the key as the encoder writes it)
        text = orjson.dumps(records, option=SORTED)[1:-1]
        if text.count(b"},{" + name) == len(records) - 1:
            return text.replace(b"},{" + name, b"}\n{" + name) + b"\n"
    return b"".join([orjson.dumps(record, option=SORTED) + b"\n" for record in records])


class RecordSpool:
    def __init__(self, partial: Path, record_of, first_key: str | None = None):
        self.partial = partial
        self.record_of = record_of  # request -> its record (a dict)
        self.first_key = first_key  # the least key of every record, if record_of vouches for one (encode_lines)
        self.file = self._guarded(partial.open, "wb")
        self.waiting: dict[int, dict] = {}  # index -> record, for records whose lower indices are still open
        self.ready: list[dict] = []  # records in index order up to next_index, not yet encoded
        self.next_index = 0

    def add(self, request) -> None:
        record = self.record_of(request)
        index = request.spec.index
        if index != self.next_index:
            self.waiting[index] = record
            return
        ready = self.ready
        ready.append(record)
        index += 1
        waiting = self.waiting
        while index in waiting:
            ready.append(waiting.pop(index))
            index += 1
        self.next_index = index
        if len(ready) >= CHUNK:
            self.ready = []
            self._guarded(self.file.write, encode_lines(ready, self.first_key))

    def finish(self) -> Path:
        """Write what still waits (in index order) and close the file; returns its temporary path."""
        ready, self.ready = self.ready, []
        self._guarded(self.file.write, encode_lines(ready, self.first_key))
        rest = [self.waiting[index] for index in sorted(self.waiting)]
        for start in range(0, len(rest), CHUNK):
            self._guarded(self.file.write, encode_lines(rest[start:start + CHUNK], self.first_key))
        self.waiting.clear()
        self._guarded(self.file.close)
        return self.partial

    def _guarded(self, write, *args):
        """`write(*args)`; a failure (a full disk) removes the partial file and is one OutputError saying why."""
        try:
            return write(*args)
        except OSError as error:
            self.discard()
            raise OutputError(f"cannot write {self.partial.parent}: {error.strerror or error}") from None

    def discard(self) -> None:
        try:
            if getattr(self, "file", None) is not None:
                self.file.close()
        except OSError:
            pass  # (the data that did not fit goes with the file)
        self.file = None
        self.partial.unlink(missing_ok=True)
