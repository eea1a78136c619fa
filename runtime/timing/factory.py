"""Build the step-time provider of one worker role from its compiled plan entry.

`role_plan` is the plan's ``engine.workers.<role>`` dict; ``timing.type``
chooses the provider: ``fixed`` (``prefill_ms``, ``decode_ms``), ``polynomial``
(``prefill`` / ``decode`` coefficient lists, optional ``prefill_variable`` /
``decode_variable``) or ``default`` (the roofline, which also needs the model
and hardware records, the backend, ``parallelism.tensor`` and the KV dtype).
"""
from __future__ import annotations

from kvreplay.compiler.geometry.kv_bytes import DTYPE_BYTES

from . import Timing
from .default import default_timing
from .fixed import fixed_timing
from .polynomial import polynomial_timing


def make_timing(role_plan: dict, model: dict, hardware: dict, backend: str, kv_dtype: str) -> Timing:
    timing = role_plan.get("timing", {"type": "default"})
    kind = timing.get("type", "default")
    if kind == "fixed":
        return fixed_timing(timing["prefill_ms"], timing["decode_ms"])
    if kind == "polynomial":
        return polynomial_timing(timing["prefill"], timing["decode"],
                                 timing.get("prefill_variable", "tokens"),
                                 timing.get("decode_variable", "batch_size"))
    if kind == "default":
        tensor = role_plan.get("parallelism", {}).get("tensor", 1)
        return default_timing(model, hardware, backend, tensor, DTYPE_BYTES[kv_dtype])
    raise ValueError(f"unknown timing type {kind!r}")
