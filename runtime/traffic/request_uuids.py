"""A request's uuid text from its index: version-4 layout of two counter-based draws (streams 1 and 2 of seed 0x6B76).

`uuid_of` formats one directly (rather than through uuid.UUID, about 4 us a
request).  A long run asks for hundreds of thousands, each about 2.5 us in
Python's big ints; from block FIRST_BLOCK on they are made a block of BLOCK at
a time with numpy's wrapping uint64 arithmetic (the same SplitMix64 rounds as
rng.mix64) and cut from the block's text, so a short run never imports numpy.
The text is the same either way (tests/test_request_uuids.py checks both).
"""
from __future__ import annotations

from .rng import MASK, mix64, stream_base

UUID_HIGH, UUID_LOW = stream_base(0x6B76, 1), stream_base(0x6B76, 2)
HIGH_CLEAR, HIGH_SET = ~0xF000 & MASK, 0x4000  # (the version nibble of the high word: 4)
LOW_CLEAR, LOW_SET = ~(0xC000 << 48) & MASK, 0x8000 << 48  # (the variant bits of the low word: RFC 4122)
BLOCK = 1024
# (block numbers: indices below 65,536 are made one at a time: numpy's import costs 0.1 s, about what 50,000 of them
# cost alone; a longer run imports it anyway, and its blocks from here on save ~2 us a request)
FIRST_BLOCK = 64
GROUPS = ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))  # (the hex digits of each dash-separated group)
KEEP = 64  # blocks kept: requests end out of index order, but within a window of recent indices
_blocks: dict[int, str] = {}  # block number -> its uuids' text, 36 characters each, in increasing block order


def uuid_of(index: int) -> str:
    block = index // BLOCK
    if FIRST_BLOCK <= block < 1 << 53:
        text = _blocks.get(block)
        if text is None and (len(_blocks) < KEEP or block > min(_blocks)):  # (not one below those kept: no thrash)
            text = _new_block(block)
        if text is not None:
            start = (index - block * BLOCK) * 36
            return text[start:start + 36]
    return _one(index)


def _one(index: int) -> str:
    index &= MASK
    text = "%016x%016x" % ((mix64(UUID_HIGH ^ index) & HIGH_CLEAR) | HIGH_SET,
                           (mix64(UUID_LOW ^ index) & LOW_CLEAR) | LOW_SET)
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"  # (GROUPS, in one f-string: per request)


def _new_block(block: int) -> str:
    """The text of block `block`'s uuids, kept (with the KEEP - 1 highest blocks already kept)."""
    import numpy as np

    indices = np.arange(block * BLOCK, (block + 1) * BLOCK, dtype=np.uint64)
    words = np.empty((BLOCK, 2), dtype=">u8")  # (big-endian: the hex of the bytes is the hex of the words)
    words[:, 0] = (_mix64(np, indices ^ np.uint64(UUID_HIGH)) & np.uint64(HIGH_CLEAR)) | np.uint64(HIGH_SET)
    words[:, 1] = (_mix64(np, indices ^ np.uint64(UUID_LOW)) & np.uint64(LOW_CLEAR)) | np.uint64(LOW_SET)
    digits = np.frombuffer(words.tobytes().hex().encode(), dtype=np.uint8).reshape(BLOCK, 32)
    out = np.full((BLOCK, 36), ord("-"), dtype=np.uint8)
    for dashes, (start, stop) in enumerate(GROUPS):  # (group g sits g dashes to the right of its digits)
        out[:, start + dashes:stop + dashes] = digits[:, start:stop]
    text = out.tobytes().decode("ascii")
    _blocks[block] = text
    if len(_blocks) > KEEP:  # (the lowest goes: a block is asked for in increasing order, mostly)
        del _blocks[min(_blocks)]
    return text


def _mix64(np, value):
    """rng.mix64 over a uint64 array (its products wrap modulo 2^64, as the masked Python ones)."""
    value = value + np.uint64(0x9E3779B97F4A7C15)
    value = (value ^ (value >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    value = (value ^ (value >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return value ^ (value >> np.uint64(31))
