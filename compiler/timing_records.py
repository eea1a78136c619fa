"""The timing records of the finished plan: fixed, polynomial and roofline pass costs, and the roofline's fitted terms.

Part of the plan the runtime reads (a role's `plan_records.RolePlan.timing`): frozen dataclasses with slots.  Fixed
and polynomial timings give integer nanoseconds; the roofline's terms are seconds, as its formulas take them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

@dataclass(frozen=True, slots=True)
class FixedTiming:
    prefill_ns: int  # a pass with prefill work
    decode_ns: int  # a pass with decoding requests


@dataclass(frozen=True, slots=True)
class PolynomialTiming:
    """ns = sum(numerator_i * x**i) / denominator per phase; the coefficients' exact decimals."""

    prefill_numerators: tuple[int, ...]
    prefill_denominator: int
    decode_numerators: tuple[int, ...]
    decode_denominator: int
    prefill_variable: str  # "tokens" | "batch_tokens"
    decode_variable: str  # "batch_size" | "context_tokens"


@dataclass(frozen=True, slots=True)
class RooflineTerms:
    """The calibrated terms of one backend on one GPU architecture at one weight precision (timing_inputs.py)."""

    compute_efficiency: float  # share of the tensor-core peak GEMMs reach
    attention_efficiency: float  # share of the bf16 tensor-core peak attention kernels reach
    weight_efficiency: float  # share of HBM bandwidth weight reads reach
    expert_efficiency: float  # share of HBM bandwidth the routed experts' reads reach
    kv_efficiency: float  # share of HBM bandwidth KV reads reach
    pass_overhead_s: float  # scheduler, sampling, launch per pass
    layer_overhead_s: float  # small kernels of every layer (norms, rotary, launches)
    prefill_layer_overhead_s: float  # per attention layer of a pass with prefill (the prefill attention kernel)
    decode_token_overhead_s: float  # per decode token of a pass (its sampling, its sequence in the kernels)
    moe_layer_overhead_s: float  # routing, expert grouping and dispatch of every MoE layer
    all_reduce_latency_s: float
    all_reduce_efficiency: float  # all-reduced bytes per second as a share of the per-GPU NVLink figure
    all_reduce: bool  # False: the pass runs no tensor-parallel all-reduce of its own (fused into the MoE combine)
    all_to_all_efficiency: float  # share of NVLink bandwidth the expert dispatch and combine reach
    # share of the weight precision's peak the routed experts' grouped GEMMs reach (0: priced with the other GEMMs)
    expert_compute_efficiency: float = 0.0
    # s of a decode attention kernel's KV read per attention layer that its fixed latency hides (the kernel costs its
    # read beyond that); 0: the read adds to the layer's small kernels whole
    decode_kv_hidden_s: float = 0.0
    # block-scaled GEMMs run in tiles of this many tokens (rows), and this share of their FLOP time is paid per whole
    # tile (a pass of 257 tokens pays two tiles); 0: FLOP time follows the tokens
    gemm_tile_tokens: int = 0
    gemm_tile_share: float = 0.0
    # the prefill attention kernel's cost reaches `prefill_layer_overhead_s` at this many prefill tokens in the pass and
    # is a quarter of it for a chunk of a few tokens, growing in proportion between; 0: the full cost at any size
    prefill_ramp_tokens: int = 0
    # every decode token of a pass beyond the first `decode_tail_from` adds `decode_tail_s` (a dense model's decode
    # attention over fp8 KV at large batches); 0: none
    decode_tail_from: int = 0
    decode_tail_s: float = 0.0
    # a decode attention kernel's dip in efficiency at middling reads: each attention layer adds up to `decode_dip_s`,
    # rising from 0 at `decode_dip_bytes[0]` bytes of KV read per layer to the full cost at [1], falling back to 0 at
    # [2], in proportion to log2 of the bytes (TensorRT-LLM on Hopper); 0: none
    decode_dip_s: float = 0.0
    decode_dip_bytes: tuple[int, int, int] = (0, 0, 0)
    # a pass's all-reduce and all-to-all count each token beyond the first 4,096 at this share (their larger messages
    # reach more of the link); 1: every token alike
    collective_large_share: float = 1.0
    # a decode-only pass reads this share of the routed experts at (tokens, share) points, linearly between them
    # and the last share beyond; (): 1 - (1 - k/E)^T
    decode_expert_share: tuple[tuple[int, float], ...] = ()
    # a bf16 GEMM's FLOP time counts each row beyond the first `gemm_knee_tokens` of a pass at `gemm_beyond_share`
    # (its measured tables get dearer per row past the knee); 0: every row alike
    gemm_knee_tokens: int = 0
    gemm_beyond_share: float = 1.0
    # the prefill attention of one prompt of `tokens` from none cached, at (tokens, s per attention layer x tensor
    # degree) points, linearly between them and on from the last two (a measured table, DeepSeek V4 vLLM); a chunk of
    # n new tokens costs the table at n, and a pass's k chunks cost k chunks of their mean prompt after their mean
    # prefix; (): the FLOP and read roofline
    prefill_attention_curve: tuple[tuple[int, float], ...] = ()
    # with that table, a chunk after a cached prefix adds this many s per attention layer x tensor degree for each new
    # token and cached token, counting at most `prefill_prefix_cap` cached tokens (0: the table alone)
    prefill_prefix_pair_s: float = 0.0
    prefill_prefix_cap: int = 0
    # a native-MTP verify pass costs the plain pass of its tokens x (L + this) / L whatever its drafts (0: L + nextn)
    draft_layers_equivalent: float = 0.0
    # a prefill pass's routed experts (reads and grouped GEMMs) at (tokens, s x expert group size) points, linearly
    # between them and on from the last two (AISimulate's measured table, Kimi K3); (): their read and FLOP terms
    prefill_expert_curve: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class RooflineTiming:
    """The model and hardware numbers the roofline of one tensor-parallel rank needs."""

    tensor: int
    num_layers: int
    attention_layers: int  # layers that attend over the whole context (`kv_layers`)
    attention_heads: int
    head_dim: int
    hidden_size: int
    params: float
    active_params: float  # parameters one token passes through
    gemm_params: float  # of those, the ones its GEMMs multiply (no embedding lookup; logits only for a sequence's last)
    low_precision: bool  # block-scaled fp8/fp4 weights
    peak_flops: float  # tensor-core FLOP/s at the weight precision
    attention_peak_flops: float  # bf16 tensor-core FLOP/s (attention runs in bf16 whatever the weights are)
    memory_bandwidth_gbps: float
    nvlink_bandwidth_gbps: float | None  # only read when tensor > 1
    weight_bytes: float  # weights a forward reads per GPU (no input embedding table)
    kv_bytes_per_token: int  # KV bytes per token on this rank
    terms: RooflineTerms
    moe_layers: int = 0  # 0: a dense model
    experts: int = 0
    experts_per_token: int = 0
    routed_weight_fraction: float = 0.0  # of weight_bytes, the routed experts (read only where tokens go)
    expert_parallel: int = 1
    # ranks that split each routed expert's width (`moe_tensor`); the dispatch spans expert_parallel x expert_tensor
    expert_tensor: int = 1
    ffn_width: int = 0  # a dense model's FFN intermediate size (its gate activation is an elementwise kernel); 0: MoE


Timing = Union[FixedTiming, PolynomialTiming, RooflineTiming]
