"""Where the replay departs from the ideal LRU curve at its own capacity, block by block, and why.

The ideal cache (mrc.py) hits lookup block j of a request iff j's threshold is
in 1..capacity; the replay's first admission of that request hit its first
`hits` blocks.  Every block the ideal cache hits and the replay did not gets
the class the miss breakdown gave that block (miss_classes.py: placement when
another rank held it, in_flight when a running request had not computed it,
policy or capacity when the engine's pinned running requests and its LRU
order evicted it, ...; `not_admitted` when the request never was); blocks the
replay hit and the ideal cache did not (a tier behind G1 restored them, or
the arrival order differs from the admission order) are counted apart.  So
ideal - replay = sum(missed_by_replay) - hit_by_replay_only, exactly.
"""
from __future__ import annotations

import numpy as np

from .block_stream import BlockStream
from .miss_classes import CLASSES, LAST_BLOCK

NOT_ADMITTED = "not_admitted"


def attribute(stream: BlockStream, found: np.ndarray, capacity: int, indices: list[int], first_codes: dict) -> dict:
    """The gap at `capacity` blocks in tokens: `found` is mrc.thresholds(stream), `indices` each stream row's
    request index, `first_codes` the miss breakdown's (hits, class per missed block) of each first admission."""
    size = stream.block_size
    ideal_hit = (found >= 1) & (found <= capacity)
    missed = np.zeros(len(CLASSES), dtype=np.int64)
    not_admitted = only_replay = replay_hits = 0
    at = 0
    for row, index in enumerate(indices):
        limit = int(stream.limits[row])
        ideal = ideal_hit[at:at + limit]
        at += limit
        first = first_codes.get(index)
        if first is None:
            not_admitted += int(np.count_nonzero(ideal))
            continue
        hits, codes = first
        replay_hits += hits
        shared = min(hits, limit)
        only_replay += shared - int(np.count_nonzero(ideal[:shared])) + max(0, hits - limit)
        behind = ideal[shared:]
        classes = np.full(len(behind), LAST_BLOCK, dtype=np.int64)  # (past the replay's lookup limit)
        known = min(len(codes), len(behind))
        classes[:known] = codes[:known]
        missed += np.bincount(classes[behind], minlength=len(CLASSES))
    by_class = {name: int(blocks) * size for name, blocks in zip(CLASSES, missed)}
    by_class[NOT_ADMITTED] = not_admitted * size
    return {"capacity_blocks": int(capacity), "ideal_lru_hit_tokens": int(np.count_nonzero(ideal_hit)) * size,
            "replay_hit_tokens": replay_hits * size, "missed_by_replay": by_class,
            "hit_by_replay_only": only_replay * size}
