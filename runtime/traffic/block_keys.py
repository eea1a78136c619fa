"""Block identity: chained hashes of full blocks, compatible with Dynamo's KV events.

A block hash is XXH3-64 (seed 1337) of the block's token ids as little-endian
u32; a sequence hash is XXH3-64 of (parent sequence hash, block hash), so equal
prefixes give equal chains.  Only full blocks are hashed.

Synthetic prompts are concatenations of segments; a segment is a run of tokens
from one numbered source (a shared prefix, a session's turn, a request's own
tokens), token `p` of source `s` having id ``(s * SOURCE_STRIDE + p) mod 2**32``.
Mooncake traces name each 512-token block by a prefix-chained id, so the engine
blocks inside trace block `h` get cheap keys derived from `h` (the trace
guarantees that equal ids have equal prefixes); real XXH3 hashes for them are
computed only when KV events are written.  Those keys are small integers (fast
in CPython).  Only opal's workload stages mix trace and synthetic content in one
replay: a uniform 64-bit XXH3 key then meets a given small key as rarely as it
meets another XXH3 key.

At block sizes where a trace block holds many engine blocks, a request's keys
come as a `KeyRuns` list that knows where its runs of consecutive keys start,
so G1's extents (runtime/tiers/g1_key_groups.py) read a run's length from it
instead of comparing every key with a range.
"""
from __future__ import annotations

from array import array

import sys

import xxhash

SEED = 1337
SOURCE_STRIDE = 1_000_003
_HASH = xxhash.xxh3_64_intdigest
BIG_ENDIAN = sys.byteorder == "big"


RUNS_PER = 32  # fewest engine blocks a trace block for which the keys carry their runs (G1's extents read them)


class KeyRuns(list):
    """A list of keys that knows its runs: keys[starts[j]:starts[j + 1]] (the last to the end) each continue their
    first key by a step of +1 or -1 (a run may be followed by one that continues it: only the runs' insides are
    promised).  Built only by `trace_keys` and `add`; callers read it as a list and never change it in place."""

    __slots__ = ("starts",)

    def __init__(self):
        super().__init__()
        self.starts: list[int] = []

    def add(self, run: range) -> None:
        """Append the keys of `run` (step +1 or -1) as one run."""
        if run:
            self.starts.append(len(self))
            self.extend(run)

    def __reduce__(self):
        return (_key_runs, (list(self), self.starts))


def _key_runs(keys: list, starts: list) -> KeyRuns:
    out = KeyRuns()
    out.extend(keys)
    out.starts = starts
    return out


def token_ids(source: int, start: int, stop: int) -> array:
    base = (source * SOURCE_STRIDE + start) & 0xFFFFFFFF
    end = base + (stop - start)
    if end <= 1 << 32:
        return array("I", range(base, end))
    return array("I", range(base, 1 << 32)) + array("I", range(0, end - (1 << 32)))


def block_hash(tokens: array) -> int:
    if BIG_ENDIAN:  # the hash is defined over little-endian u32
        tokens = array("I", tokens)
        tokens.byteswap()
    return _HASH(tokens.tobytes(), SEED)


def sequence_hash(parent: int | None, block: int) -> int:
    """The chain's hash after `block`; the first block's sequence hash is its block hash, as in Dynamo."""
    if parent is None:
        return block
    payload = parent.to_bytes(8, "little") + block.to_bytes(8, "little")
    return _HASH(payload, SEED)


def segment_tokens(segments: tuple[tuple[int, int, int], ...]) -> array:
    """Token ids of a prompt given as (source, start, stop) segments."""
    out = array("I")
    for source, start, stop in segments:
        out.extend(token_ids(source, start, stop))
    return out


def chain_keys(tokens: array, block_size: int) -> list[int]:
    """Sequence hashes of every full block of `tokens`."""
    keys, parent = [], None
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = sequence_hash(parent, block_hash(tokens[start:start + block_size]))
        keys.append(parent)
    return keys


def trace_keys(hash_ids, tokens: int, trace_block: int, block_size: int) -> list[int]:
    """Keys of the full engine blocks of a Mooncake request (`tokens` long, one id per `trace_block` tokens; the
    ids as a list or tuple), as a new list.

    Trace ids are prefix-chained, so the id of the trace block holding an engine block's last token, plus
    the engine block's offset from that trace block's start, identifies the engine block's whole prefix.
    When the trace block holds whole engine blocks, block j of id h is h * (T // bs) + j: numbered densely,
    because dicts and sets index by the low bits of an int key, and spaced-out keys would collide there.
    """
    span = 2 * trace_block
    full = tokens // block_size
    if trace_block % block_size == 0:  # the common case: each id's blocks are one range of keys
        per = trace_block // block_size
        keys = KeyRuns() if per >= RUNS_PER else []
        add = keys.add if per >= RUNS_PER else keys.extend
        start = end = -1  # (ids are >= 0)
        for h in hash_ids[:-(-full // per)]:  # consecutive ids (a prompt's new blocks, usually) extend one range
            if h != end:
                if end >= 0:
                    add(range(start * per, end * per))
                start = h
            end = h + 1
        if end >= 0:
            add(range(start * per, end * per))
        del keys[full:]  # (inside the last run: a run is at least `per` keys and the cut is fewer, so no start goes)
        return keys
    # the block's start is in [-(block_size - 1), trace_block - block_size] from trace block `last`'s start: shifted
    # by trace_block that is in [0, span) when block_size <= trace_block; a larger engine block (it spans several
    # trace blocks) is shifted by block_size - 1 instead, so its key can never be negative (an output block's key)
    shift = trace_block if block_size <= trace_block else block_size - 1
    keys = []
    for start in range(0, full * block_size, block_size):
        last = (start + block_size - 1) // trace_block
        keys.append(hash_ids[last] * span + (start - last * trace_block + shift))
    return keys
