"""Step-time records of the finished plan: fixed times in ns, exact polynomials, roofline inputs.

`timing_record` turns a role's ``timing`` block (``fixed``, ``polynomial`` or ``default``) into
the record its runtime provider reads.  For the roofline (``default``) this is where the model
and hardware catalogs are read: active parameters (estimated for MoE without ``active_params``),
the tensor-core rate of the weight precision, the weight bytes a forward reads and the KV bytes
per token of one rank.  The roofline's formula and calibration constants stay with the runtime
provider (runtime/timing/default.py), which reads only this record.
"""
from __future__ import annotations

from .durations import ms_coefficients_to_ns, ms_to_ns
from .geometry.kv_bytes import DTYPE_BYTES, native_bytes_per_token
from .geometry.memory import weights_per_gpu
from .plan_records import FixedTiming, PolynomialTiming, RooflineTiming, Timing

BACKENDS = ("vllm", "sglang", "trtllm")
LOW_PRECISION = ("fp8", "fp4")
# tensor-core precision to try for each weight precision, best first
TFLOPS_KEYS = {"bfloat16": ("bf16",), "float16": ("fp16", "bf16"), "fp8": ("fp8", "bf16"),
               "fp4": ("fp4", "fp8", "bf16")}
# the roofline prices KV by its width only, so a KV dtype counts as the dtype of its byte width
KV_DTYPE_BY_BYTES = {1: "fp8", 2: "bfloat16", 4: "float32"}


def active_params(model: dict) -> float:
    """Parameters one token passes through (all of them for a dense model)."""
    if model.get("active_params"):
        return model["active_params"]
    experts, per_token = model.get("num_experts"), model.get("experts_per_token")
    inter, hidden = model.get("moe_intermediate_size"), model.get("hidden_size")
    if experts and per_token and inter and hidden:
        routed = min(model["params"], model["num_layers"] * experts * 3 * hidden * inter)
        return model["params"] - routed * (1 - per_token / experts)
    return model["params"]


def peak_flops(hardware: dict, weight_dtype: str) -> float:
    table = hardware["tflops"]
    for key in TFLOPS_KEYS.get(weight_dtype, ("bf16",)):
        if key in table:
            return table[key] * 1e12
    raise ValueError(f"hardware has no tensor-core rate for {weight_dtype} weights")


def decode_weight_bytes(model: dict, tensor: int) -> float:
    """Weights a full forward reads per GPU: the input embedding is a row lookup, so leave it out."""
    untied_embedding = 0 if model.get("tie_word_embeddings") else model.get("vocab_size", 0) * model.get("hidden_size", 0)
    return weights_per_gpu(model, tensor, 1) - untied_embedding * 2 / tensor


def roofline_record(model: dict, hardware: dict, backend: str, tensor: int, kv_dtype_bytes: int) -> RooflineTiming:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")
    dtype = model.get("weight_dtype", "bfloat16")
    layers, heads = model["num_layers"], model["num_attention_heads"]
    return RooflineTiming(
        tensor=tensor, num_layers=layers, attention_layers=model.get("kv_layers", layers), attention_heads=heads,
        head_dim=model.get("head_dim") or model["hidden_size"] // heads, hidden_size=model["hidden_size"],
        params=model["params"], active_params=active_params(model), low_precision=dtype in LOW_PRECISION,
        peak_flops=peak_flops(hardware, dtype), memory_bandwidth_gbps=hardware["memory_bandwidth_gbps"],
        nvlink_bandwidth_gbps=hardware.get("nvlink_bandwidth_gbps"),
        weight_bytes=decode_weight_bytes(model, tensor),
        kv_bytes_per_token=native_bytes_per_token(model, KV_DTYPE_BY_BYTES[kv_dtype_bytes], tensor))


def timing_record(role_plan: dict, model: dict, hardware: dict, backend: str, kv_dtype: str) -> Timing:
    """The record of `role_plan`'s (the plan's ``engine.workers.<role>``) step-time provider."""
    timing = role_plan.get("timing", {"type": "default"})
    kind = timing.get("type", "default")
    if kind == "fixed":
        return FixedTiming(ms_to_ns(timing["prefill_ms"]), ms_to_ns(timing["decode_ms"]))
    if kind == "polynomial":
        prefill, prefill_denominator = ms_coefficients_to_ns(timing["prefill"])
        decode, decode_denominator = ms_coefficients_to_ns(timing["decode"])
        return PolynomialTiming(prefill, prefill_denominator, decode, decode_denominator,
                                timing.get("prefill_variable", "tokens"), timing.get("decode_variable", "batch_size"))
    if kind == "default":
        tensor = role_plan.get("parallelism", {}).get("tensor", 1)
        return roofline_record(model, hardware, backend, tensor, DTYPE_BYTES[kv_dtype])
    raise ValueError(f"unknown timing type {kind!r}")
