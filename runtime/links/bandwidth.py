"""Max-min fair sharing of bandwidth among concurrent transfers (one pure function).

Each transfer belongs to a group (a rank) whose transfers together may not
exceed the group's limit, and all transfers together may not exceed the pool
limit.  Rates are found by progressive filling: every unfrozen transfer's
rate rises at the same pace; when a group reaches its limit its transfers
freeze, when the pool reaches its limit everything freezes.  Bandwidth a
group cannot use because its own limit binds therefore goes to the others.
`None` (or 0 in configs) means unlimited.  A transfer limited by nothing gets
`math.inf`.

Examples from the spec: four ranks at 32 GB/s, one transfer each, under an
80 GB/s pool -> 20 GB/s each; one rank with nine transfers and one with one,
both at 32 GB/s under 80 -> 32/9 and 32 (each rank moves 32 GB/s); the same
ten under a 20 GB/s pool -> 2 GB/s each (the busier rank moves 18 GB/s).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Hashable, Mapping, Sequence


def fair_rates(groups: Sequence[Hashable], group_limits: Mapping[Hashable, float | None],
               pool_limit: float | None = None) -> list[float]:
    """Rate of each transfer; `groups[i]` is the group of transfer i."""
    count = Counter(groups)
    limits = {g: math.inf if not group_limits.get(g) else float(group_limits[g]) for g in count}
    pool = math.inf if not pool_limit else float(pool_limit)
    level = 0.0  # the common rate of unfrozen transfers
    frozen: dict[Hashable, float] = {}  # group -> per-transfer rate once its limit binds
    used_frozen = 0.0
    while len(frozen) < len(count):
        open_groups = [g for g in count if g not in frozen]
        open_transfers = sum(count[g] for g in open_groups)
        # the level at which the next group limit binds, and at which the pool binds
        group_level = min(limits[g] / count[g] for g in open_groups)
        pool_level = (pool - used_frozen) / open_transfers
        if pool_level <= group_level:
            level = pool_level
            for g in open_groups:
                frozen[g] = level
            break
        level = group_level
        for g in open_groups:
            if limits[g] / count[g] <= level:
                frozen[g] = limits[g] / count[g]
                used_frozen += limits[g]
    return [frozen[g] for g in groups]
