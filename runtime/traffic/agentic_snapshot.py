"""Snapshot cuts of agentic plays (`agentic_snapshot: {seed}`): where each initial lane starts inside its play.

As AISimulate documents the load (docs/replay/agentic/warmup.md): lane i takes play i of the corpus (wrapping,
a play taken again being a new incarnation), and its cut is drawn uniformly between 25% and 75% of the play's
span of recorded request starts, from the seed and the lane alone (so the same corpus, lanes and seed give
the same cuts).  Requests that started strictly before the cut are history and are not replayed; the rest
keep their timers: a request whose dependencies are all history starts at its recorded start less the cut
after the lane starts, any other after what it still waits for, with its authored delay.  Each conversation
that has both history and remaining requests has a primer: its last historical request's whole input (what
warm-up sends first).  kvreplay draws the cut with its own counter-based generator (runtime/traffic/rng.py),
not AISimulate's BLAKE3 sample, so the cuts differ from AISimulate's for the same seed.  AISimulate's draw is
the BLAKE3 digest of (schema, seed, its graph digest, play id, lane, ordinal), and its graph digest hashes its
own lowering of the trace (for AgentX: node ids and hash ids of its making), which kvreplay does not reproduce;
for agentic Mooncake rows, the one format whose digest kvreplay could reproduce, a dependent's recorded start
is 0 in AISimulate, so every play's cut there falls at a zero-width span or AISimulate refuses the snapshot:
the draw never decides anything (reference-facts §35).
"""
from __future__ import annotations

from dataclasses import replace

from .rng import uniform

SNAPSHOT_STREAM = 0x534E4150  # "SNAP": the generator stream of cut draws (stream = this + lane)


def cut_of(play, seed: int, lane: int) -> int:
    starts = [node.authored_ns for node in play.nodes]
    first, last = min(starts), max(starts)
    return first + round((0.25 + 0.5 * uniform(seed, SNAPSHOT_STREAM + lane, 0)) * (last - first))


def snapshot(play, cut_ns: int) -> tuple:
    """(the play's remaining requests as a play of their own, its primers in conversation order)."""
    history = [node.authored_ns < cut_ns for node in play.nodes]
    kept = [i for i, past in enumerate(history) if not past]
    new_index = {old: new for new, old in enumerate(kept)}
    nodes = []
    for old in kept:
        node = play.nodes[old]
        waits = tuple(new_index[w] for w in node.waits_for if not history[w])
        delay = node.delay_ns if waits else max(0, node.authored_ns - cut_ns)
        nodes.append(replace(node, waits_for=waits, delay_ns=delay, authored_ns=max(0, node.authored_ns - cut_ns)))
    last_past: dict = {}
    for i, past in enumerate(history):
        if past:
            last_past[play.nodes[i].conversation] = play.nodes[i]
    remaining = {node.conversation for node in nodes}
    primers = [last_past[c] for c in sorted(last_past) if c in remaining]
    return replace(play, nodes=tuple(nodes)), primers


def record(lane: int, play, seed: int, cut_ns: int, rest, primers: list) -> dict:
    """The summary's `agentic_snapshots` entry of one lane."""
    return {"lane": lane, "play_id": play.name, "seed": seed, "cut_ms": cut_ns / 1e6,
            "history_requests": len(play.nodes) - len(rest.nodes), "remaining_requests": len(rest.nodes),
            "primers": len(primers)}
