"""A worker: the DP ranks that step together under one timing provider, its pass in flight and its periods."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..engines.engine import VLLM, Engine
from ..timing import Timing


@dataclass
class Worker:
    index: int
    ranks: list  # scheduler.Rank
    timing: Timing
    batches: list | None = None  # in-flight pass
    pass_ends: list = field(default_factory=list)  # end times of the passes it runs now (several: macro step)
    passes: int = 0
    blocked: bool = False  # a scheduled pass waits for copies of blocks it reuses
    # (joined, ready, left) of each period the worker is part of its role (scaled workers); left None = to the end
    periods: list = field(default_factory=lambda: [(0, 0, None)])
    removed: list = field(default_factory=list)  # per period: when it was removed after leaving (see scaling.py)
    scaled: bool = False  # its role has a scaling schedule
    busy_spans: list | None = None  # when a list: (start, end) ns of its passes (a macro step is one span)
    engine: Engine = VLLM  # its backend's scheduler and cache policy (engines/)

    def placeable(self, now: int, ready: bool) -> bool:
        return any(start <= now and (end is None or now < end) and (not ready or up <= now)
                   for start, up, end in self.periods)
