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


from .timing_records import Timing


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
