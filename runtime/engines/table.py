"""Which engine runs a role: the backend name the compiler checked -> its engine."""
from __future__ import annotations

from .engine import VLLM, Engine
from .sglang import SGLANG
from .trtllm import TRTLLM

ENGINES = {"vllm": VLLM, "trtllm": TRTLLM, "sglang": SGLANG}


def engine_for(backend: str, role: str = "aggregated") -> Engine:
    """SGLang's disaggregated roles still run vLLM's engine: its P/D source and destination rules (a held
    source's path lock, a destination's private prompt) are not modelled yet."""
    if backend == "sglang" and role != "aggregated":
        return VLLM
    return ENGINES.get(backend, VLLM)
