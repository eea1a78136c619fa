"""The finished plan: frozen, typed records the replay runtime reads, every default applied.

What the plan pass hands the runtime, besides (not instead of) the canonical JSON plan.  Every
duration is integer nanoseconds, every size bytes or blocks, every optional knob resolved to
its value (``None`` only where "absent" means something, e.g. no transfer delay), and every file
the config names already parsed.  The runtime reads attributes of these and never imports this
module, so it never needs the compiler.

Records are frozen dataclasses with slots; a trace row is a `NamedTuple`, which is as
immutable and typed but cheaper to build, and a predict trace's rows are kept in columns
(`trace_table.TraceTable`), which give them one at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Union

if TYPE_CHECKING:  # (it reads TraceRow from here)
    from .trace_table import TraceTable


# ------------------------------------------------------------------ timing
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


# ------------------------------------------------------------------ tiers behind G1
@dataclass(frozen=True, slots=True)
class LinkPlan:
    """One direction of a tier's link: a cap per group (rank or worker) and one for a shared pool, the latency to
    first byte, and how many copies may move at once (the runtime's tier specs take this record as it is)."""

    bandwidth_gbps: float
    shared_bandwidth_gbps: float | None  # only for a cluster-shared pool
    latency_ns: int  # latency to first byte
    slots: int | None = None  # I/O concurrency (None: no limit)


@dataclass(frozen=True, slots=True)
class TierPlan:
    """G2 (host) or G3 (storage) of one role."""

    scope: str  # dp_rank_local | worker_local | cluster_shared
    shared: bool  # one pool for the whole role
    blocks: int  # per pool
    block_bytes: int
    write: LinkPlan  # into the tier (G2: d2h)
    read: LinkPlan  # out of it (G2: h2d)
    connector: str | None = None  # G2's vLLM connector profile


@dataclass(frozen=True, slots=True)
class PeerFetchPlan:
    """KVCR: pulls of G2 blocks from peer ranks."""

    latency_ns: int
    bandwidth_gbps: float
    block_bytes: int  # one block of every TP GPU of a rank


# ------------------------------------------------------------------ workers
@dataclass(frozen=True, slots=True)
class RolePlan:
    name: str  # aggregated | prefill | decode
    backend: str  # vllm | sglang | trtllm: the engine its workers run (opal's worker: vllm)
    replica_steps: tuple[tuple[int, int], ...]  # (from ns, replicas): replicas at 0, then scaling steps
    scaled: bool  # the role has scaling steps
    startup_delay_ns: int
    attention_data: int  # DP ranks per worker
    g1_blocks: int
    block_size: int
    prefix_caching: bool
    max_batched_tokens: int
    max_sequences: int
    state_blocks_per_request: int
    timing: Timing
    host: TierPlan | None
    storage: TierPlan | None
    peer_fetch: PeerFetchPlan | None
    prefill_decode_interval: int = 0  # SGLang: scheduler rounds without prefill after each extend pass
    schedule_policy: str = "fcfs"  # SGLang: fcfs | lpm
    host_loop: bool = False  # SGLang's overlap scheduler: a pass is decided while the one before it runs
    speculation: SpeculationPlan | None = None  # speculative decoding of its decode passes
    state_cache: StateCachePlan | None = None  # a hybrid model's per-request state and its snapshots


@dataclass(frozen=True, slots=True)
class StateCachePlan:
    """A per-request state in G1 (`state_cache`): its bytes, the blocks it takes, and the granularity
    (`prefix_match_unit`) at which a prompt keeps snapshots of it."""

    bytes_per_request: int
    blocks_per_request: int
    block_bytes: int
    prefix_match_unit: int
    # prompt_ends (vLLM align mode; Kimi K3) | pass_ends (DeepSeek V4) | whole_blocks: facts section 24
    snapshot_rule: str


@dataclass(frozen=True, slots=True)
class SpeculationPlan:
    """Speculative decoding: `draft_tokens` drafts verified per decode pass (KV lookahead slots too), accepted
    per position with conditional `rates` (ngram) or `mean_accepted` on average (native MTP, `nextn`)."""

    kind: str  # ngram | mtp
    draft_tokens: int
    rates: tuple[float, ...]  # ngram: one per draft position; mtp: ()
    mean_accepted: float  # mtp: `nextn_accepted`; ngram: 0.0
    seed: int
    draft_layers: int = 0  # layers a decode pass runs besides the model's: mtp `nextn` (target-shaped), ngram 0
    drafts_read_kv: bool = False  # each draft reads its request's KV (else one read per request verifies them all)


@dataclass(frozen=True, slots=True)
class HandoffPlan:
    """Disaggregated P/D: how a prefilled request's KV reaches its decode rank."""

    bytes_per_token: int
    bandwidth_gbps: float | None  # None: no transfer delay
    timing_mode: str  # destination_missing | full_prompt
    state_bytes: int  # the prefill role's state cache per request
    destination_first: bool  # the backend reserves decode blocks before prefill (SGLang)
    latency_ns: int


# ------------------------------------------------------------------ traffic
class TraceRow(NamedTuple):
    """One checked Mooncake row."""

    timestamp_ns: int  # after the load's speedup
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    session_id: str | None


@dataclass(frozen=True, slots=True)
class ListedRequest:
    """One request of a ReplaySpec's list."""

    id: str
    input_tokens: int
    output_tokens: int
    input_token_ids: tuple[int, ...]
    arrival_ns: int
    session_id: str | None
    turn_index: int | None
    dp_rank: int | None
    prefill_dp_rank: int | None
    worker_idx: int | None
    prefill_worker_idx: int | None
    kv_hints: tuple[tuple[int, int | None, int], ...]  # (rank, worker_idx, cached_tokens)


@dataclass(frozen=True, slots=True)
class SyntheticSource:
    input_tokens: int
    output_tokens: int
    cached_prefix_tokens: int  # one prefix every request shares


@dataclass(frozen=True, slots=True)
class SessionSource:
    new_input_tokens_per_turn: int
    output_tokens_per_turn: int
    turns: int
    prefix_groups: int
    shared_prefix_ratio: float
    inter_turn_delay_ns: int


@dataclass(frozen=True, slots=True)
class TraceSource:
    block_size: int  # tokens per hash id
    rows: TraceTable  # (a sequence of TraceRow; a tuple of them in tests)


@dataclass(frozen=True, slots=True)
class RequestListSource:
    requests: tuple[ListedRequest, ...]


Source = Union[SyntheticSource, SessionSource, TraceSource, RequestListSource, None]  # None: agentx; weka: agentic_records


@dataclass(frozen=True, slots=True)
class TrafficPlan:
    kind: str  # synthetic | synthetic-session | trace | requests | agentic (a weka trace) | agentx
    source: Source
    load: str  # concurrency | poisson | constant_rate | trace_timestamps
    concurrency: int  # closed-loop slots
    rate: float | None  # requests (or sessions) per second of an open-loop load
    seed: int
    max_in_flight: int | None  # a ReplaySpec list's closed loop
    request_limit: int | None
    session_limit: int | None
    stop_ns: int | None  # no arrival after this virtual time


# ------------------------------------------------------------------ the whole plan
@dataclass(frozen=True, slots=True)
class ReplayPlan:
    plan_version: int
    roles: tuple[RolePlan, ...]  # in the order aggregated, prefill, decode
    handoff: HandoffPlan | None  # disaggregated only
    traffic: TrafficPlan
    context_length: int | None  # prompt + output tokens a request may hold; None: no limit (opal, a model with no maximum)
    enable_chunked_prefill: bool
    placement: str
    eviction_policy: str  # lru | belady
    record_per_request: bool
    opal: object | None = None  # opal_records.OpalPlan for an opal config
