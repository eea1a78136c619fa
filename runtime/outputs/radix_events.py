"""SGLang's KV events: Stored / Removed records that follow radix-tree insertions and evictions, batched and flushed.

SGLang publishes what its radix tree does, not what its allocator does: a
node inserted is a Stored event of its pages (with the hash of the page before
it, its parent link, and the session of the request that wrote it), pages
evicted are a Removed event.  Consecutive compatible events are batched into
one: stores that continue each other (the next one's parent is the last page
of the one before) and come from the same session, and removals.  Batches wait
in a buffer that the scheduler flushes after an extend pass, every 40 decode
passes and when the rank goes idle (engines/sglang.py).  Page hashes are the
same chained XXH3 hashes as vLLM's block events (traffic/block_keys.py), over
the tokens the runs stand for, computed only while events are captured and
memoised on the nodes.
"""
from __future__ import annotations

from array import array

from ..tiers.token_runs import TokenIds
from ..traffic import block_keys as blocks
from .kv_events import OUTPUT_SOURCE, TRACE_SOURCE

DECODE_FLUSH_EVERY = 40  # decode forwards between two flushes


def run_tokens(runs) -> array:
    """The token ids runs stand for (Mooncake ids and outputs as kv_events.py derives them)."""
    out = array("I")
    for label, a, b in runs:
        if isinstance(label, TokenIds):
            ids = array("I")
            ids.frombytes(label[4 * a:4 * b])
            out.extend(ids)
        elif isinstance(label, tuple):
            source = (TRACE_SOURCE if label[0] == "h" else OUTPUT_SOURCE) + label[1]
            out.extend(blocks.token_ids(source, a, b))
        else:
            out.extend(blocks.token_ids(label, a, b))
    return out


class RadixEvents:
    """A rank's pending SGLang events; `flush` hands them to the replay's event log (pool.events)."""

    def __init__(self, pool, sink: list):
        self.pool = pool
        self.sink = sink
        self.pending: list = []  # [kind, hashes, extra]

    def hashes(self, node) -> list:
        """Chained hashes of the node's pages (memoised; splits and truncations keep them in step)."""
        if node.hashes is None:
            parent = node.parent
            last = None
            if parent is not None and parent.length:
                last = self.hashes(parent)[-1]
            tokens, page, out = run_tokens(node.runs), self.pool.page, []
            for start in range(0, node.length, page):
                last = blocks.sequence_hash(last, blocks.block_hash(tokens[start:start + page]))
                out.append(last)
            node.hashes = out
        return node.hashes

    def stored(self, node) -> None:
        hashes = self.hashes(node)
        parent = self.hashes(node.parent)[-1] if node.parent.length else None
        session = node.writer.session_id if node.writer is not None else None
        last = self.pending[-1] if self.pending else None
        if last is not None and last[0] == "Stored" and last[1][-1] == parent \
                and last[2].get("session_id") == session:
            last[1].extend(hashes)
            return
        extra = {"parent_hash": parent}
        if session is not None:
            extra["session_id"] = session
        self.pending.append(["Stored", list(hashes), extra])

    def removed(self, node, first_page: int) -> None:
        """Pages first_page.. of `node` are evicted (all of them when the whole node goes)."""
        hashes = self.hashes(node)[first_page:]
        last = self.pending[-1] if self.pending else None
        if last is not None and last[0] == "Removed":
            last[1].extend(hashes)
            return
        self.pending.append(["Removed", list(hashes), {}])

    def flush(self) -> None:
        self.sink.extend((kind, hashes, extra) for kind, hashes, extra in self.pending)
        self.pending = []
