"""Step-time providers: how long one scheduler pass of one rank takes, in integer nanoseconds.

A provider is a function `PassWork -> int` built once per worker role from the
compiled plan (`make_timing`).  Providers: `fixed` (prefill_ms / decode_ms per
pass), `polynomial` and `default` (a roofline model from the model and
hardware catalogs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class PassWork:
    """What one rank computes in one scheduler pass."""

    prefill_chunks: tuple[tuple[int, int], ...] = ()  # (new tokens, tokens already in KV before the chunk)
    decode_requests: int = 0
    decode_context: int = 0  # sum over decoding requests of their context length (prompt + generated)
    draft_tokens: int = 0  # speculative drafts the decoding requests verify besides their own token
    draft_context: int = 0  # KV tokens the drafts read besides their requests' own read (0: one read verifies all)
    draft_layers: int = 0  # layers a decode pass runs besides the model's (native MTP's module)

    @property
    def prefill_tokens(self) -> int:
        return sum(new for new, _ in self.prefill_chunks)


Timing = Callable[[PassWork], int]
