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
    __slots__ = ("serial", "index", "specs", "numbers", "last")

    def __init__(self, capacity: int):
        # per block id: its writer's number while the block is keyed, else -1 (so a release tells its unkeyed blocks
        # from this column in C, not from a gather of the key objects)
        self.serial = column(capacity) - 1
        self.index = column(capacity)  # per block id: its index in the writer's chain
        self.specs: list = [None]  # number -> writer (0: None); keeps each writer alive while it may be asked for
        self.numbers: dict[int, int] = {}  # id(writer) -> its number (ids are stable: `specs` holds the writers)
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
        self.last = (writer, number)
        return number

    def one(self, block: int, index: int, writer) -> None:
        """`block` is keyed by `writer` at chain index `index`."""
        self.serial[block] = self.number(writer)
        self.index[block] = index

    def run(self, blocks: list[int], start: int, writer) -> None:
        """`blocks` are keyed by `writer` at chain indices start, start + 1, ..."""
        index = ids(blocks)
        self.serial[index] = self.number(writer)
        self.index[index] = load_numpy().arange(start, start + len(blocks))

    def some(self, blocks: list[int], indices, writer) -> None:
        """`blocks` are keyed by `writer` at the chain indices `indices` (one each, in order)."""
        if blocks:
            index = ids(blocks)
            self.serial[index] = self.number(writer)
            self.index[index] = list(indices)

    def unkeyed(self, index) -> int:
        """How many of the blocks in the index array `index` hold no key."""
        return int(load_numpy().count_nonzero(self.serial[index] < 0))

    def forget(self, victims: list[int], index=None) -> None:
        """The victims hold no key any more (`index`: them as an index array, or None)."""
        if len(victims) == 1:
            self.serial[victims[0]] = -1
        else:
            self.serial[ids(victims) if index is None else index] = -1

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
