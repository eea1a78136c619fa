"""Who wrote each keyed APC block, and at which chain index: columns set a run at a time, read back as runs.

APC's eviction hook (write-through, kvc.py) needs, per evicted block, the
request whose content wrote it and the block's index in that request's chain;
it acts once per run of one writer's blocks (the largest chunk-aligned end of
the run).  A prompt's blocks are keyed together, enter the idle queue together
and leave it together, so an eviction batch of hundreds of blocks is a few
such runs (13.6 k runs for 2.45 M blocks in 10.7 k batches on the conversation
trace's first 3,000 rows).  So the columns are numpy (by block id): the
writer as a serial number (0: none, a restore) and the index, both set for a
keyed run with one fancy assignment, and an eviction batch is cut into runs
where the serial changes, in C, instead of gathering a writer object and an
index object per block.  `apc.ApcPool` owns one and is its only user.
"""
from __future__ import annotations

from .apc_queue import column, ids, load_numpy


class Writers:
    __slots__ = ("serial", "index", "specs", "numbers", "last", "held")

    def __init__(self, capacity: int):
        # per block id: its writer's number while the block is keyed, else -1 (so a release tells its unkeyed blocks
        # from this column in C, not from a gather of the key objects)
        self.serial = column(capacity) - 1
        self.index = column(capacity)  # per block id: its index in the writer's chain
        # number -> writer (0: None), held while some block it keyed is keyed still, then None: memory follows the
        # cached blocks, not the trace's requests
        self.specs: list = [None]
        self.held: list[int] = [0]  # number -> how many blocks it keyed are keyed still
        self.numbers: dict[int, int] = {}  # id(writer) -> its number (ids are stable while `specs` holds the writer)
        self.last: tuple = (None, 0)  # (the writer last numbered, its number): keyed runs come a request at a time

    def number(self, writer) -> int:
        last = self.last
        if last[0] is writer:
            return last[1]
        if writer is None:
            return 0
        number = self.numbers.get(id(writer))
        if number is None:
            number = self.numbers[id(writer)] = len(self.specs)
            self.specs.append(writer)
            self.held.append(0)
        self.last = (writer, number)
        return number

    def one(self, block: int, index: int, writer) -> None:
        """`block` is keyed by `writer` at chain index `index`."""
        self.serial[block] = number = self.number(writer)
        self.held[number] += 1
        self.index[block] = index

    def run(self, blocks: list[int], start: int, writer) -> None:
        """`blocks` are keyed by `writer` at chain indices start, start + 1, ..."""
        if not blocks:  # (no number for a writer that keys nothing: it would never be let go)
            return
        index = ids(blocks)
        self.serial[index] = number = self.number(writer)
        self.held[number] += len(blocks)
        self.index[index] = load_numpy().arange(start, start + len(blocks))

    def some(self, blocks: list[int], indices, writer) -> None:
        """`blocks` are keyed by `writer` at the chain indices `indices` (one each, in order)."""
        if blocks:
            index = ids(blocks)
            self.serial[index] = number = self.number(writer)
            self.held[number] += len(blocks)
            self.index[index] = list(indices)

    def unkeyed(self, index) -> int:
        """How many of the blocks in the index array `index` hold no key."""
        return int(load_numpy().count_nonzero(self.serial[index] < 0))

    def forget(self, victims: list[int], index=None) -> None:
        """The victims hold no key any more (`index`: them as an index array, or None)."""
        if len(victims) == 1:
            self._let_go(int(self.serial[victims[0]]), 1)
            self.serial[victims[0]] = -1
            return
        index = ids(victims) if index is None else index
        numbers, counts = load_numpy().unique(self.serial[index], return_counts=True)
        for number, count in zip(numbers.tolist(), counts.tolist()):
            self._let_go(number, count)
        self.serial[index] = -1

    def _let_go(self, number: int, count: int) -> None:
        """`count` blocks keyed by writer `number` (-1: none, 0: a restore) hold no key now; a writer none of whose
        blocks is keyed any more is let go (its number is not given again: a later request is a new writer)."""
        if number > 0:
            self.held[number] -= count
            if not self.held[number]:
                writer, self.specs[number] = self.specs[number], None
                del self.numbers[id(writer)]
                if self.last[0] is writer:
                    self.last = (None, 0)

    def runs(self, victims: list[int], index=None) -> list[tuple]:
        """The victims (keyed) as runs of one writer's consecutive victims: [(writer, their chain indices)], the
        indices a list for one victim, else a numpy view (no int object per block); `index`: the victims as an
        index array, when the queue made one already."""
        if len(victims) == 1:  # (a decode's block, most batches: no index array)
            block = victims[0]
            return [(self.specs[int(self.serial[block])], [int(self.index[block])])]
        if index is None:
            index = ids(victims)
        serials = self.serial[index]
        positions = self.index[index]
        cuts = (load_numpy().flatnonzero(serials[1:] != serials[:-1]) + 1).tolist()
        if not cuts:
            return [(self.specs[int(serials[0])], positions)]
        starts = [0, *cuts]
        specs = self.specs
        return [(specs[number], positions[start:stop])
                for number, start, stop in zip(serials[starts].tolist(), starts, [*cuts, len(positions)])]


def victims(keys, runs) -> list[tuple]:
    """An eviction batch as (key, writer, chain index) per victim, in order (what a test compares)."""
    return list(zip(keys, (writer for writer, positions in runs for _ in positions),
                    (int(position) for _, positions in runs for position in positions)))
