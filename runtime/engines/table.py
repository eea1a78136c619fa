"""Which engine runs a role: the backend name the compiler checked -> its engine."""
from __future__ import annotations

from .engine import VLLM, Engine
from .sglang import SGLANG
from .trtllm import TRTLLM

ENGINES = {"vllm": VLLM, "trtllm": TRTLLM, "sglang": SGLANG}


def engine_for(backend: str, role: str = "aggregated") -> Engine:
    """The backend's engine, on every role (P/D included)."""
    return ENGINES.get(backend, VLLM)
