"""A request's uuid: the per-index text, the numpy blocks' text and uuid.UUID's reading of the same 128 bits agree."""
from __future__ import annotations

import uuid

from kvreplay.runtime.traffic import request_uuids
from kvreplay.runtime.traffic.rng import mix64


def definition(index: int) -> str:
    """The uuid by its definition: two draws, the version and variant bits set as uuid.UUID(version=4) sets them."""
    value = (mix64(request_uuids.UUID_HIGH ^ index) << 64) | mix64(request_uuids.UUID_LOW ^ index)
    return str(uuid.UUID(int=value, version=4))


def test_the_first_indices_are_made_one_at_a_time_and_match_the_definition():
    request_uuids._blocks.clear()
    first = request_uuids.FIRST_BLOCK * request_uuids.BLOCK
    for index in (0, 1, 2, 1023, 4095, first - 1):
        assert request_uuids.uuid_of(index) == definition(index)
    assert request_uuids._blocks == {}  # (a short run makes no block: numpy is not imported for it)


def test_blocks_give_the_definitions_text_in_any_order():
    request_uuids._blocks.clear()
    first = request_uuids.FIRST_BLOCK * request_uuids.BLOCK
    indices = [first, first + 5000, 1_000_003, first + 1, 2 ** 40 + 7, 999_999, 123_456_789, first + 1023, first + 1024]
    for index in indices:
        text = request_uuids.uuid_of(index)
        assert text == definition(index) == request_uuids._one(index)
        assert uuid.UUID(text).version == 4 and uuid.UUID(text).variant == uuid.RFC_4122
    assert set(request_uuids._blocks) == {index // 1024 for index in indices}  # (the blocks asked for, no other)
    block = 977  # every uuid of one whole block
    assert all(request_uuids.uuid_of(i) == request_uuids._one(i) for i in range(block * 1024, (block + 1) * 1024))


def test_the_kept_blocks_are_bounded_and_an_older_index_is_made_alone():
    request_uuids._blocks.clear()
    low = request_uuids.FIRST_BLOCK + 10
    for block in range(low, low + request_uuids.KEEP + 5):
        request_uuids.uuid_of(block * 1024)
    assert len(request_uuids._blocks) == request_uuids.KEEP and min(request_uuids._blocks) == low + 5
    assert request_uuids.uuid_of((low + 1) * 1024 + 3) == definition((low + 1) * 1024 + 3)
    assert low + 1 not in request_uuids._blocks  # (below every kept block: made alone, nothing evicted for it)
