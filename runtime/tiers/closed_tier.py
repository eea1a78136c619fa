"""Stores offered to a closed tier: one that is full and never evicts (opal's default), so it takes nothing more.

Such a tier's contents are frozen, and a store into it changes only counters:
how many of the offered keys it lacks.  APC's write-through offers a writer's
prefix again at every eviction batch that reaches one of the writer's blocks
(a prompt's blocks leave a few at a time, tail first), so counting the lacking
keys of the prefix each time would be O(prefix) per batch.  `ClosedCounts`
finds, once per key list, where the tier holds its keys, and answers each
prefix's count by bisection.  A count is reused only while the tier's
resident count is the one it was found at (a closed tier's contents can only
grow past it, never change in place).  Entries name their request by a weak
reference: a finished request's spec may go, and its id be reused.

A request's two key lists share their start: its "prompt" list (its prompt's
chunks at the chain's chunk size, `RequestSpec.prompt_chunks`) is its chunk list
cut after the prompt's full chunks (plus, with `save_unfull_chunk`, a tuple key
for the partial chunk, which meets no other key).  A write-through of a
finished writer asks for a prefix of its chunk list: the prompt list's held
positions (found at its retirement) answer for the prompt's full chunks, so a
prefix within them needs no key list (a finished writer's keys are forgotten,
and would be made again) and a longer one searches only its output keys.
Only trace content qualifies: its
output keys are negative and its own, and its prompt keys are not (requests.py's
`_compute_keys`, block_keys.py's `trace_keys`), so the chunk list is distinct
exactly when its prompt's full chunks are; other content is counted on its own list.
"""
from __future__ import annotations

from bisect import bisect_left
from weakref import ref

from .lru_order import KeepAll


def closed(tier) -> bool:
    """Does `tier` take no new key, whatever is offered (full, and it never evicts)?"""
    return type(tier.order) is KeepAll and tier.resident >= tier.capacity


class ClosedCounts:
    """Per closed tier and key list: the positions of the keys it holds (the key list must list no key twice)."""

    __slots__ = ("found", "chunk_size")

    def __init__(self, chunk_size: int = 0):
        # (id(tier), id(spec), kind) -> (the spec, weakly; resident then; held positions, or None: keys not distinct)
        self.found: dict = {}
        self.chunk_size = chunk_size  # the chain's: the "prompt" lists' chunk size

    def lacking(self, tier, spec, kind, keys_of, count: int) -> int | None:
        """How many of the first `count` keys of `spec`'s key list `kind` (`keys_of()` makes it) `tier` lacks;
        None when the list names a key twice (the caller counts those its own way)."""
        memo = (id(tier), id(spec), kind)
        found = self.found.get(memo)
        if found is None or found[0]() is not spec or found[1] != tier.resident:
            shared = self._from_prompt(tier, spec, kind)
            if shared is not None:
                full, held = shared
                if count <= full:  # (its first `count` keys are the prompt's)
                    return count - bisect_left(held, count)
                keys = keys_of()  # only its output keys are searched: they are distinct, and none is a prompt's
                held = held[:bisect_left(held, full)] + [full + position for position in
                                                          tier.order.held_positions(keys[full:])]
                found = (ref(spec), tier.resident, held)
            else:
                keys = keys_of()
                distinct = len(set(keys)) == len(keys)
                found = (ref(spec), tier.resident, tier.order.held_positions(keys) if distinct else None)
            self.found[memo] = found
        held = found[2]
        return None if held is None else count - bisect_left(held, count)

    def _from_prompt(self, tier, spec, kind) -> tuple | None:
        """(the prompt's full chunks, the held positions of its "prompt" list) when `kind` is the chain's chunk
        list of a trace request whose prompt list was counted at `tier`'s resident count and is distinct."""
        if kind != self.chunk_size or not spec.content.hash_ids:
            return None
        prompt = self.found.get((id(tier), id(spec), "prompt"))
        if prompt is None or prompt[0]() is not spec or prompt[1] != tier.resident or prompt[2] is None:
            return None
        return spec.prompt_len // kind, prompt[2]
