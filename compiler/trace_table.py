"""A checked Mooncake trace in columns: the plan's rows, read as `TraceRow`s, kept in typed arrays.

A million-row trace as tuples of Python ints is about a gigabyte; in columns
(one flat array of every row's hash ids, 4 bytes each while they fit, 8
after) it is a tenth of that.  Rows are made when asked for, one at a time.
The table is filled once by the traces pass and never changed after.
"""
from __future__ import annotations

from array import array
from itertools import islice
from typing import Iterator

from .plan_records import TraceRow


class TraceTable:
    __slots__ = ("timestamps", "inputs", "outputs", "starts", "ids", "sessions")

    def __init__(self):
        self.timestamps = array("q")  # ns, after the load's speedup
        self.inputs = array("q")
        self.outputs = array("q")
        self.starts = array("q", [0])  # row i's hash ids are ids[starts[i]:starts[i + 1]]
        self.ids = array("I")  # widened to "Q" at the first id of 2^32 or more
        self.sessions: dict[int, str] = {}  # row -> session_id, for the rows that have one

    def append(self, timestamp_ns: int, input_length: int, output_length: int, hash_ids: list, session_id) -> None:
        size = len(self.ids)
        try:
            self.ids.extend(hash_ids)
        except OverflowError:  # (extend kept the ids before the one that did not fit)
            self.ids = array("Q", self.ids[:size])
            self.ids.extend(hash_ids)
        if session_id is not None:
            self.sessions[len(self.inputs)] = session_id
        self.timestamps.append(timestamp_ns)
        self.inputs.append(input_length)
        self.outputs.append(output_length)
        self.starts.append(len(self.ids))

    def extend(self, other: TraceTable) -> None:
        """Append every row of `other` (the next file of the same source)."""
        for row in other:
            self.append(*row)

    def token_totals(self, count: int) -> tuple[int, int]:
        """(prompt tokens, output tokens) of the first `count` rows, summed over the columns in C."""
        return sum(self.inputs[:count]), sum(self.outputs[:count])

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, position: int) -> TraceRow:
        if not 0 <= position < len(self.inputs):
            raise IndexError(position)
        starts = self.starts
        return TraceRow(self.timestamps[position], self.inputs[position], self.outputs[position],
                        tuple(self.ids[starts[position]:starts[position + 1]]), self.sessions.get(position))

    def __iter__(self) -> Iterator[TraceRow]:
        """The rows in order, straight from the columns (the replay reads a million-row trace this way, once)."""
        ids, sessions, starts, make = self.ids, self.sessions, self.starts, tuple.__new__
        rows = zip(self.timestamps, self.inputs, self.outputs, starts, islice(starts, 1, None))
        for position, (timestamp, prompt, output, start, stop) in enumerate(rows):
            yield make(TraceRow, (timestamp, prompt, output, tuple(ids[start:stop]), sessions.get(position)))
