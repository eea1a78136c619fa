"""The deployment generator: a plan (or a config, compiled first) as each engine's launch arguments.

`generate(plan, engine)` returns one `Launch` per worker role; the spec's rules ("KV cache fields") live
in the per-engine modules and in fields.RoleView (block size absent or null: omitted; a fixed block
count as tokens only with an explicit block size).
"""
from __future__ import annotations

from . import sglang, trtllm, vllm
from .fields import ENGINES, DeployError, roles
from .launch import Launch, text

GENERATORS = {"vllm": vllm.launch, "sglang": sglang.launch, "trtllm": trtllm.launch}


def generate(plan: dict, engine: str | None = None) -> list[Launch]:
    """Every role's launch for `engine` (default: the plan's own backend)."""
    engine = engine or (plan.get("engine") or {}).get("backend", "vllm")
    if engine not in GENERATORS:
        raise DeployError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    return [GENERATORS[engine](view) for view in roles(plan)]


__all__ = ["DeployError", "ENGINES", "Launch", "generate", "text"]
