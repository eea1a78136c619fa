"""What a deployment generator reads from a plan: each role's resolved knobs, and which of them the user set.

A plan's `provenance` names every value the compiler filled in (`default(...)`, `inferred(...)`); a value
without an entry there was written by the user. The spec's deployment rules hinge on that difference:
a block size the user left absent or null is omitted so the engine picks its own runtime default, since
the simulation default (vLLM 64, SGLang 1, TensorRT-LLM 32) need not be the engine's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

ENGINES = ("vllm", "sglang", "trtllm")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


class DeployError(ValueError):
    """The plan cannot be written as this engine's deployment without guessing."""


@dataclass(frozen=True)
class RoleView:
    """One worker role of a plan, as a generator needs it."""
    role: str
    mode: str  # aggregated | disaggregated
    model: str
    context_length: int | None  # None: the model's maximum, which every engine takes by default
    kv_dtype: str  # auto | bfloat16 | fp8 | int8
    kv: dict
    parallelism: dict
    scheduler: dict
    explicit_block_size: int | None  # the block size the user wrote, else None

    def pointer(self, *parts: str) -> str:
        """The config path of a knob of this role, for error messages."""
        return ".".join(("engine", "workers", self.role) + parts)

    @property
    def capacity(self) -> dict:
        return self.kv.get("capacity") or {}

    @property
    def fixed_blocks(self) -> int | None:
        """G1 blocks per attention-DP rank when capacity is fixed, else None."""
        return self.capacity.get("blocks") if self.capacity.get("type") == "fixed" else None

    @property
    def memory_fraction(self) -> float | None:
        """The fraction the simulation sized G1 with (default capacity only)."""
        return self.capacity.get("memory_fraction") if self.capacity.get("type") != "fixed" else None

    @property
    def host_offload(self) -> dict | None:
        return self.kv.get("host_offload")

    @property
    def disaggregated(self) -> bool:
        return self.mode == "disaggregated"

    def tokens(self, blocks: int, knob: str, engine: str) -> int:
        """`blocks` as a token count; only an explicit block size says how many tokens a block holds."""
        if self.explicit_block_size is None:
            raise DeployError(
                f"{self.pointer('kv_cache', knob)}: {ENGINE_NAMES[engine]} takes a token capacity, and "
                f"converting {blocks} blocks needs an explicit {self.pointer('kv_cache', 'block_size')} "
                "matching the runtime (the simulation default is not the engine's); set block_size")
        return blocks * self.explicit_block_size

    def host_bytes(self, engine: str) -> int:
        """Bytes of the host (G2) pool per rank: blocks x block size x bytes per token."""
        host = self.host_offload
        tokens = self.tokens(host["num_host_blocks"], "host_offload.num_host_blocks", engine)
        return tokens * int(self.kv["bytes_per_token"])

    def host_gigabytes(self, engine: str) -> int:
        """The host pool in whole decimal GB, rounded up so the engine's pool holds at least the plan's."""
        return max(1, math.ceil(self.host_bytes(engine) / 1e9))


def _user_set(provenance: dict, pointer: str) -> bool:
    origin = provenance.get(pointer, "")
    return not (origin.startswith("default(") or origin.startswith("inferred("))


def roles(plan: dict) -> list[RoleView]:
    """The plan's worker roles, prefill before decode (the order an operator starts them)."""
    engine = plan.get("engine") or {}
    provenance = plan.get("provenance") or {}
    workers = engine.get("workers") or {}
    order = {"aggregated": 0, "prefill": 1, "decode": 2}
    views = []
    for role in sorted(workers, key=lambda r: (order.get(r, 9), r)):
        worker = workers[role]
        kv = worker.get("kv_cache") or {}
        block = kv.get("block_size")
        explicit = block if block is not None and _user_set(
            provenance, f"/engine/workers/{role}/kv_cache/block_size") else None
        context = engine.get("context_length")
        views.append(RoleView(
            role=role, mode=engine.get("mode", "aggregated"), model=engine["model"],
            context_length=context if isinstance(context, int) else None,
            kv_dtype=worker.get("kvcache_quant_mode") or engine.get("kvcache_quant_mode") or "auto",
            kv=kv, parallelism=worker.get("parallelism") or {}, scheduler=worker.get("scheduler") or {},
            explicit_block_size=explicit))
    return views


def gpus(view: RoleView) -> int:
    """Physical GPUs of one replica of the role: tensor x pipeline x attention-DP ranks."""
    p = view.parallelism
    return p.get("tensor", 1) * p.get("pipeline", 1) * p.get("attention_data", 1)
