"""Block identity (runtime/blocks.py): XXH3 block hashes, chained sequence hashes, synthetic token ids
and Mooncake trace keys.  Every expected value is computed here independently from the rule in
REFERENCE.md "Block hashing", with `xxhash.xxh3_64_intdigest` and `struct`, never with blocks.py itself.
"""
from __future__ import annotations

import random

import struct
from array import array

import xxhash

from kvreplay.runtime.traffic import block_keys as blocks
from kvreplay.runtime.serving.requests import Content, RequestSpec

SEED = 1337


def xxh(data: bytes) -> int:
    return xxhash.xxh3_64_intdigest(data, seed=SEED)


def expected_block_hash(tokens) -> int:
    """XXH3-64 (seed 1337) of the tokens as little-endian u32."""
    return xxh(struct.pack(f"<{len(tokens)}I", *tokens))


def expected_link(parent: int, block: int) -> int:
    """XXH3-64 (seed 1337) of (parent sequence hash, block hash), both little-endian u64."""
    return xxh(struct.pack("<QQ", parent, block))


def u32(*tokens: int) -> array:
    return array("I", tokens)


# --- block hash --------------------------------------------------------------

def test_block_hash_is_xxh3_seed_1337_over_little_endian_u32():
    """Block hash = XXH3-64, seed 1337, of the block's token ids as little-endian u32 bytes."""
    assert blocks.SEED == 1337
    assert blocks.block_hash(u32(1, 2, 3, 4)) == xxh(
        b"\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00")
    # a multi-byte token pins the byte order: 0x01020304 is written 04 03 02 01
    assert blocks.block_hash(u32(0x01020304, 0xFFFFFFFF, 0, 7)) == xxh(
        b"\x04\x03\x02\x01\xff\xff\xff\xff\x00\x00\x00\x00\x07\x00\x00\x00")


def test_block_hash_uses_the_seed():
    """The seed matters: the unseeded XXH3 of the same bytes is a different value."""
    data = struct.pack("<4I", 10, 11, 12, 13)
    assert blocks.block_hash(u32(10, 11, 12, 13)) == xxh(data)
    assert blocks.block_hash(u32(10, 11, 12, 13)) != xxhash.xxh3_64_intdigest(data)


def test_sequence_hash_of_parent_and_block():
    """Sequence hash = XXH3-64 (seed 1337) of (parent sequence hash, block hash) as two LE u64."""
    parent, block = 0x0123456789ABCDEF, 0xFEDCBA9876543210
    assert blocks.sequence_hash(parent, block) == xxh(
        bytes([0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01, 0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]))
    assert blocks.sequence_hash(5, 9) == expected_link(5, 9)
    assert blocks.sequence_hash(5, 9) != blocks.sequence_hash(9, 5)  # order matters


# --- chains ------------------------------------------------------------------

def test_chain_links_every_block_to_its_parent_sequence_hash():
    """Block i > 0 of a chain is sequence_hash(key of block i-1, block hash of block i)."""
    tokens = u32(*range(100, 112))  # 3 full blocks of 4
    keys = blocks.chain_keys(tokens, 4)
    assert len(keys) == 3
    assert keys[1] == expected_link(keys[0], expected_block_hash(range(104, 108)))
    assert keys[2] == expected_link(keys[1], expected_block_hash(range(108, 112)))


def test_first_sequence_hash_is_the_block_hash_as_in_dynamo():
    """The root of a chain has no parent: as in Dynamo's router, its sequence hash is its block hash.

    REFERENCE.md ("Block hashing") says the hashes are for KV events compatible with Dynamo's router;
    Dynamo (kv_router `compute_seq_hash_for_block`) pushes `block_hashes[0]` unchanged as the first sequence
    hash and links only later blocks.  kvreplay feeds a parent of 0 to the root instead.
    """
    tokens = u32(*range(100, 112))
    b0, b1, b2 = (expected_block_hash(range(s, s + 4)) for s in (100, 104, 108))
    s0 = b0
    s1 = expected_link(s0, b1)
    s2 = expected_link(s1, b2)
    assert blocks.chain_keys(tokens, 4) == [s0, s1, s2]


def test_chain_hashes_only_full_blocks():
    """Only full blocks are hashed: 10 tokens in blocks of 4 give 2 keys, 3 tokens give none."""
    assert len(blocks.chain_keys(u32(*range(10)), 4)) == 2
    assert blocks.chain_keys(u32(*range(10)), 4) == blocks.chain_keys(u32(*range(8)), 4)
    assert blocks.chain_keys(u32(1, 2, 3), 4) == []
    assert len(blocks.chain_keys(u32(*range(12)), 4)) == 3


def test_equal_prefixes_give_equal_chains_and_a_change_propagates():
    """Keys depend on the whole prefix: shared leading blocks give equal keys; a change in block 0 changes all."""
    a = blocks.chain_keys(u32(*range(12)), 4)
    b = blocks.chain_keys(u32(*range(8), 99, 99, 99, 99), 4)  # same first two blocks, different third
    c = blocks.chain_keys(u32(7, *range(1, 12)), 4)  # first token differs
    assert a[:2] == b[:2] and a[2] != b[2]
    assert all(x != y for x, y in zip(a, c))
    # the same block content at a different position (different parent) gets a different key
    d = blocks.chain_keys(u32(*range(4), *range(4)), 4)
    assert d[0] != d[1]


# --- synthetic token ids -------------------------------------------------------

def test_token_ids_of_a_source():
    """Token p of source s is (s * 1_000_003 + p) mod 2**32."""
    assert blocks.SOURCE_STRIDE == 1_000_003
    assert list(blocks.token_ids(0, 0, 4)) == [0, 1, 2, 3]
    assert list(blocks.token_ids(2, 5, 8)) == [2_000_011, 2_000_012, 2_000_013]
    s = 5000  # 5000 * 1_000_003 = 5_000_015_000 > 2**32
    assert list(blocks.token_ids(s, 0, 2)) == [5_000_015_000 - 2 ** 32, 5_000_015_001 - 2 ** 32]


def test_token_ids_wrap_around_2_pow_32():
    """A run crossing 2**32 wraps to 0."""
    start = 2 ** 32 - 2
    assert list(blocks.token_ids(0, start, start + 4)) == [4294967294, 4294967295, 0, 1]


def test_segment_tokens_concatenate_in_order():
    """A prompt given as (source, start, stop) segments is the concatenation of the segments' tokens."""
    tokens = blocks.segment_tokens(((0, 0, 3), (1, 10, 12)))
    assert list(tokens) == [0, 1, 2, 1_000_013, 1_000_014]


def test_request_keys_cover_prompt_and_output_full_blocks():
    """RequestSpec.keys: chain keys of every full block of prompt + output tokens, memoised per block size."""
    segments = ((3, 0, 6), (4, 0, 3))  # 6 prompt tokens, 3 output tokens: 9 tokens, 2 full blocks of 4
    spec = RequestSpec(0, 6, 3, Content(segments=segments))
    tokens = [3 * 1_000_003 + p for p in range(6)] + [4 * 1_000_003 + p for p in range(3)]
    b0, b1 = expected_block_hash(tokens[0:4]), expected_block_hash(tokens[4:8])
    keys = spec.keys(4)
    assert len(keys) == 2
    assert keys[0] == b0  # the first block's sequence hash is its block hash
    assert keys[1] == expected_link(keys[0], b1)
    assert keys == blocks.chain_keys(array("I", tokens), 4)
    assert spec.keys(4) is keys  # memoised
    assert len(spec.keys(3)) == 3  # another block size, another chain


# --- Mooncake trace keys --------------------------------------------------------

def test_trace_keys_engine_blocks_inside_trace_blocks():
    """Trace block h of T tokens holds engine blocks keyed h * (T // bs) + j (j = 0, 1, ...)."""
    # T = 8, bs = 4: two blocks per id; id 5 -> 10, 11; id 6 -> 12, 13; id 7 -> 14, 15
    assert blocks.trace_keys([5, 6, 7], 24, 8, 4) == [10, 11, 12, 13, 14, 15]


def test_trace_keys_of_consecutive_ids_are_the_per_id_ranges():
    """Runs of consecutive ids are made as one range each: the keys are still id * per + j for every id in order,
    whatever the ids (repeated, descending, 0, gaps of one) and however many blocks the prompt fills."""
    rng = random.Random(20)
    for _ in range(300):
        ids = [rng.choice([0, 1, 2, 3, 7, 8, 9, 40, 41]) for _ in range(rng.randint(0, 9))]
        for block_size, per in ((4, 2), (8, 1), (2, 4)):
            tokens = rng.randint(1, max(1, 8 * len(ids)))
            full = tokens // block_size
            expected = [h * per + j for h in ids for j in range(per)][:full]
            assert blocks.trace_keys(ids, tokens, 8, block_size) == expected, (ids, tokens, block_size)
    assert blocks.trace_keys((3, 4, 5, 9, 10, 0), 48, 8, 4) == [6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 0, 1]


def test_trace_keys_equal_ids_give_equal_keys():
    """Equal hash ids (equal prefixes) give equal engine keys; the first differing id changes its blocks' keys."""
    a = blocks.trace_keys([5, 6, 7], 24, 8, 4)
    b = blocks.trace_keys([5, 6, 9], 24, 8, 4)
    assert a[:4] == b[:4] == [10, 11, 12, 13]
    assert b[4:] == [18, 19] and set(a[4:]).isdisjoint(b[4:])


def test_trace_keys_partial_last_trace_block_gives_only_full_engine_blocks():
    """A partial last trace block yields only its full engine blocks: 22 tokens in 16-token trace blocks,
    4-token engine blocks -> 5 keys (4 from id 7, one from id 9; tokens 20..21 are a partial block)."""
    keys = blocks.trace_keys([7, 9], 22, 16, 4)
    assert keys == [7 * 4, 7 * 4 + 1, 7 * 4 + 2, 7 * 4 + 3, 9 * 4]
    assert blocks.trace_keys([7, 9], 20, 16, 4) == keys  # 20 tokens: the same 5 full blocks
    assert blocks.trace_keys([7], 3, 16, 4) == []


def test_trace_keys_engine_block_straddling_trace_blocks():
    """When the trace block size is not a multiple of the engine block size, an engine block is keyed by the
    trace block holding its last token plus its offset: T = 6, bs = 4, ids [5, 8], 12 tokens ->
    block 0 (tokens 0..3, in id 5) = 5*12 + 6, block 1 (4..7, ends in id 8) = 8*12 + (4 - 6 + 6),
    block 2 (8..11, in id 8) = 8*12 + (8 - 6 + 6)."""
    assert blocks.trace_keys([5, 8], 12, 6, 4) == [66, 100, 104]
    # same first trace block, different second one: only block 0 is shared
    other = blocks.trace_keys([5, 3], 12, 6, 4)
    assert other[0] == 66 and other[1:] != [100, 104]


def test_trace_request_output_blocks_get_unique_negative_keys():
    """A trace request's output blocks are never shared: they get negative keys unique to the request."""
    spec = RequestSpec(3, 8, 6, Content(hash_ids=(1, 2), trace_block=4))  # 14 tokens: 3 full blocks of 4
    keys = spec.keys(4)
    assert keys[:2] == [1, 2]  # one engine block per trace block: the trace ids themselves
    assert keys[2:] == [-((3 << 24) + 2) - 1]
    twin = RequestSpec(4, 8, 6, Content(hash_ids=(1, 2), trace_block=4))
    assert twin.keys(4)[:2] == keys[:2] and twin.keys(4)[2] != keys[2]
