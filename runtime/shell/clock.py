"""The replay's virtual clock: the instant being handled, in integer nanoseconds (written by the shell's loop only).

Tiers whose eviction depends on time (a TTL) read it; nothing else keeps a copy of the time.
"""
from __future__ import annotations


class Clock:
    __slots__ = ("now",)

    def __init__(self):
        self.now = 0
