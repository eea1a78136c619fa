"""requests.jsonl written while the replay runs: one canonical JSON line per request, in request index order.

Requests end out of index order (a long prompt finishes after later short
ones), so a record waits here only until every lower index has been written;
what is left when the replay ends (indices of requests that never arrived) is
written in order then.  The file is written under a temporary name beside its
destination; `files.write` renames it with the others once all are complete,
and `discard` removes it when the run does not get that far.
"""
from __future__ import annotations

from pathlib import Path

import orjson

from .files import OutputError


class RecordSpool:
    def __init__(self, partial: Path, record_of):
        self.partial = partial
        self.record_of = record_of  # request -> its record (a dict)
        self.file = self._guarded(partial.open, "wb")
        self.waiting: dict[int, bytes] = {}  # index -> line, for records whose lower indices are still open
        self.next_index = 0

    def add(self, request) -> None:
        line = orjson.dumps(self.record_of(request), option=orjson.OPT_SORT_KEYS) + b"\n"
        index = request.spec.index
        if index != self.next_index:
            self.waiting[index] = line
            return
        lines = [line]
        self.next_index = index + 1
        waiting = self.waiting
        while self.next_index in waiting:
            lines.append(waiting.pop(self.next_index))
            self.next_index += 1
        self._guarded(self.file.writelines, lines)

    def finish(self) -> Path:
        """Write what still waits (in index order) and close the file; returns its temporary path."""
        self._guarded(self.file.writelines, [self.waiting[index] for index in sorted(self.waiting)])
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
