"""KV events (`--capture-kv-events`): Stored / Removed block events per DP rank, as Dynamo's router reads them.

Pools append `(kind, keys)` as blocks become discoverable or are evicted; the
replay drains them with the current time and rank into one log with a
monotonic `event_id`.  G2 events carry ``"tier": "host_pinned"``; G1 events
carry no tier.  Block hashes are the Dynamo-compatible chained XXH3 hashes:
synthetic content is keyed by them already, Mooncake blocks get them here from
token ids derived from their trace ids (memoised per key, only when capturing).
"""
from __future__ import annotations

from array import array

from ..traffic import block_keys as blocks

TRACE_SOURCE = 1 << 40  # token source of Mooncake trace block `h` is TRACE_SOURCE + h
OUTPUT_SOURCE = 1 << 41  # a trace request's own output tokens


class KvEventLog:
    def __init__(self, block_size: int):
        self.block_size = block_size
        self.records: list[dict] = []
        self.hash_of: dict[int, int] = {}

    def learn(self, request) -> None:
        """Record the Dynamo hash of every key of a trace request (synthetic keys are hashes already)."""
        spec = request.spec
        if not spec.content.hash_ids or all(k in self.hash_of for k in request.keys):
            return
        trace_block = spec.content.trace_block
        tokens = array("I")
        for h in spec.content.hash_ids:
            tokens.extend(blocks.token_ids(TRACE_SOURCE + h, 0, trace_block))
        del tokens[spec.prompt_len:]
        tokens.extend(blocks.token_ids(OUTPUT_SOURCE + spec.index, 0, spec.output_len))
        for key, value in zip(request.keys, blocks.chain_keys(tokens, self.block_size)):
            self.hash_of.setdefault(key, value)

    def drain(self, now_ns: int, rank) -> None:
        """Record what `rank`'s G1 pool and its tiers have pending (each emptied by its `events`)."""
        self.add(now_ns, rank.index, rank.pool.events)
        for label, events in rank.chain.events():
            self.add(now_ns, rank.index, events, label)

    def add(self, now_ns: int, dp_rank: int, events: list, label: str = "") -> None:
        """Record `events` (a pool's, drained) of `dp_rank` at `now_ns`; `label`: the events' `tier` (G1: none)."""
        for kind, keys, *extra in events:  # (SGLang's events carry more: parent_hash, session_id)
            if not keys:
                continue
            record = {"event_id": len(self.records), "time_ms": now_ns / 1e6, "dp_rank": dp_rank, "type": kind,
                      "block_hashes": [self.hash_of.get(k, k) for k in keys]}
            if extra:
                record.update(extra[0])
            if label:
                record["tier"] = label
            self.records.append(record)
        events.clear()
