"""A play in flight in agentic traffic: which of its nodes still wait, which are open, its timers and its outcome."""
from __future__ import annotations

from ..serving.requests import RequestSpec


class RunningPlay:
    """A play in flight: how many nodes each node still waits for, and how many released nodes are open."""

    def __init__(self, position: int, play, start_ns: int, incarnation: int):
        self.position, self.play, self.start_ns, self.incarnation = position, play, start_ns, incarnation
        self.pending = [len(node.waits_for) for node in play.nodes]
        self.dependents: list[list[int]] = [[] for _ in play.nodes]
        for index, node in enumerate(play.nodes):
            for wanted in node.waits_for:
                self.dependents[wanted].append(index)
        self.open = 0
        self.ended = 0
        self.timers: dict[int, RequestSpec] = {}  # node -> its queued release (a profile's guards may move it)
        self.held: dict[int, int] = {}  # node -> its release time past the profile's deadline (not queued)
        self.idle_since = start_ns
        self.end_ns = start_ns
        self.failure: tuple[str, str] | None = None  # its first rejected request: ("rejected", the request's name)
