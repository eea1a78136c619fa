"""A traffic's block-key stream as flat numpy arrays: what the one-pass miss-ratio curve reads.

Each request accesses the keys of every full block of its prompt and output
(`RequestSpec.keys`, as the replay's requests get them) and looks up the
longest cached run of its first ``(prompt_len - 1) // block_size`` blocks (the
last known token is always recomputed, as in the scheduler).  Keys become
dense int32 ids 0..distinct-1 (small keys through a table, hashes by one sort),
so later passes index arrays, not dicts.
Mooncake rows with whole engine blocks per trace block get their keys straight
from numpy (the same formula as block_keys.trace_keys) and nothing is memoised
on the specs: memory stays at a few arrays of one int per block.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

MASK = (1 << 64) - 1


@dataclass(frozen=True)
class BlockStream:
    block_size: int
    ids: np.ndarray  # int32: dense key ids of every request's blocks, request after request, in key order
    starts: np.ndarray  # int64: request i's blocks are ids[starts[i]:starts[i + 1]]
    limits: np.ndarray  # int64: blocks request i may look up (a prefix of its blocks)
    prompt_tokens: int  # sum of the prompts
    distinct: int  # distinct keys

    @property
    def requests(self) -> int:
        return len(self.limits)

    def with_distinct(self) -> "BlockStream":
        return replace(self, distinct=int(self.ids.max()) + 1 if len(self.ids) else 0)


def spec_keys(spec, block_size: int) -> np.ndarray:
    """uint64 keys of the full blocks of `spec`'s prompt + output, equal to `spec.keys(block_size)` mod 2**64."""
    content = spec.content
    trace_block = content.trace_block
    if content.hash_ids and trace_block % block_size == 0:
        per = trace_block // block_size
        full = spec.prompt_len // block_size
        prompt = (np.asarray(content.hash_ids, dtype=np.int64)[:, None] * per + np.arange(per)).ravel()[:full]
        own = -((spec.index << 24) + np.arange(full, (spec.prompt_len + spec.output_len) // block_size)) - 1
        return np.concatenate([prompt, own]).view(np.uint64)
    keys = spec.fresh_keys(block_size)
    return np.fromiter((k & MASK for k in keys), dtype=np.uint64, count=len(keys))


def from_specs(specs, block_size: int) -> BlockStream:
    """The stream of `specs` in the order given (the replay's arrival order)."""
    specs = list(specs)
    # every full block of prompt + output has a key: one buffer of about the right size (it grows if a request
    # has more), no list of per-request arrays
    flat = np.empty(sum((s.prompt_len + s.output_len) // block_size for s in specs), dtype=np.uint64)
    starts = np.zeros(len(specs) + 1, dtype=np.int64)
    limits = np.empty(len(specs), dtype=np.int64)
    at = 0
    for i, spec in enumerate(specs):
        keys = spec_keys(spec, block_size)
        if at + len(keys) > len(flat):
            flat = np.concatenate([flat, np.empty(max(len(keys), len(flat) // 2), dtype=np.uint64)])
        flat[at:at + len(keys)] = keys
        at += len(keys)
        starts[i + 1] = at
        limits[i] = min(len(keys), max(0, (spec.prompt_len - 1) // block_size))
    return BlockStream(block_size, dense(flat[:at]), starts, limits, sum(s.prompt_len for s in specs),
                       0).with_distinct()


def key_array(keys) -> np.ndarray:
    """A request's keys (Python ints) as uint64, mod 2**64 as spec_keys: in C when they fit an int64."""
    try:
        return np.array(keys, dtype=np.int64).view(np.uint64)
    except OverflowError:
        return np.fromiter((k & MASK for k in keys), dtype=np.uint64, count=len(keys))


def from_key_arrays(arrays: list, limits: list, block_size: int) -> BlockStream:
    """The stream of requests given as uint64 key arrays (key_array) and lookup limits (at most their length)."""
    starts = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrays], out=starts[1:])
    flat = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.uint64)
    lengths = np.diff(starts)
    limits = np.minimum(np.asarray(limits, dtype=np.int64).reshape(-1), lengths)
    return BlockStream(block_size, dense(flat), starts, limits, 0, 0).with_distinct()


SMALL = 1 << 34  # keys below this (Mooncake blocks) index a table; the rest (hashes, own output blocks) are sorted


def dense(flat: np.ndarray) -> np.ndarray:
    """Dense int32 ids of `flat`'s keys, equal keys equal ids: small keys through a table (linear, no sort)."""
    ids = np.empty(len(flat), dtype=np.int32)
    small = flat < SMALL
    values = flat[small].astype(np.int64)
    count = 0
    if len(values):
        present = np.zeros(int(values.max()) + 1, dtype=bool)
        present[values] = True
        which = np.flatnonzero(present)
        del present
        table = np.empty(int(which[-1]) + 1, dtype=np.int32)
        table[which] = np.arange(len(which), dtype=np.int32)
        ids[small] = table[values]
        count = len(which)
        del table, values
    large = ~small
    if large.any():
        _, inverse = np.unique(flat[large], return_inverse=True)
        ids[large] = inverse.ravel().astype(np.int32) + count
    return ids
