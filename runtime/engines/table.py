"""Which engine runs a role: the backend name the compiler checked -> its engine."""
from __future__ import annotations

from .engine import VLLM, Engine
from .trtllm import TRTLLM

# SGLang's own engine is not in the table yet: its roles run vLLM's
ENGINES = {"vllm": VLLM, "trtllm": TRTLLM}


def engine_for(backend: str) -> Engine:
    return ENGINES.get(backend, VLLM)
