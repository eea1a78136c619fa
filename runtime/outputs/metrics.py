"""Summary and per-request records of a finished replay, as plain data.

Latencies: TTFT = first token - arrival; TTST = second - first token; E2E =
last token - arrival; TPOT per request = (last - first) / (output - 1); ITL =
every gap between consecutive tokens, pooled over requests.  Only completed
requests count.  Percentiles interpolate linearly between order statistics;
std is the population std.  Times are reported in milliseconds (float) from
integer nanoseconds, so the same run gives the same bytes.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from itertools import accumulate

from ..serving.requests import Request
from .request_log import MS, LatencySamples, RequestLog, gap_runs

EVICTION_ASSUMPTIONS = {
    "lru": "least recently used unused block first (vLLM)",
    "belady": "offline optimal: the unused block whose next use in request input order is farthest away",
}
PERCENTILES = (("median", 50), ("p75", 75), ("p90", 90), ("p95", 95), ("p99", 99))


def weighted_stats(name: str, runs: list[tuple[float, int]]) -> dict:
    """Stats of a sample given as (value, count) runs."""
    merged: dict[float, int] = {}
    for value, count in runs:
        if count > 0:
            merged[value] = merged.get(value, 0) + count
    runs = sorted(merged.items())
    total = sum(c for _, c in runs)
    out = {f"num_{name}_samples": total}
    keys = ["mean", "min", "max", "std"] + [p for p, _ in PERCENTILES]
    if not total:
        out.update({f"{k}_{name}_ms": None for k in keys})
        return out
    mean = math.fsum(v * c for v, c in runs) / total
    variance = math.fsum(c * (v - mean) ** 2 for v, c in runs) / total
    cumulative = list(accumulate(c for _, c in runs))

    def at(position: int) -> float:  # value of the position-th order statistic (0-based)
        return runs[bisect_right(cumulative, position)][0]

    out.update({f"mean_{name}_ms": mean, f"min_{name}_ms": runs[0][0], f"max_{name}_ms": runs[-1][0],
                f"std_{name}_ms": math.sqrt(variance)})
    for label, q in PERCENTILES:
        rank = q / 100 * (total - 1)
        low = math.floor(rank)
        value = at(low)
        if rank > low:
            value += (at(low + 1) - value) * (rank - low)
        out[f"{label}_{name}_ms"] = value
    return out


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / MS


FIRST_KEY = "admission_count"  # the least key of every record `request_record` makes (RecordSpool's first_key)


def request_record(request: Request) -> dict:
    """The request's requests.jsonl record.  (Written for a million-row trace's speed: one dict display, times
    converted inline, the ITL mean from the gap runs without a list of them; the values are the same expressions.)"""
    spec = request.spec
    arrival, first, last = request.arrival_ns, request.first_token_ns, request.last_token_ns
    second, admit, end = request.second_token_ns, request.first_admit_ns, request.terminal_ns
    runs = request.gaps
    if type(runs) is not list:  # (packed: gap, count, gap, count, ...)
        runs = list(gap_runs(runs))
    gaps = sum([count for _, count in runs]) if runs else 0
    history = admission_history(request) if request.pd is not None else [_entry(a) for a in request.admissions]
    uuid = spec.uuid
    # (in the encoder's order, sorted: its sort then finds nothing to move)
    record = {
        "admission_count": len(history),
        "admission_history": history,
        "arrival_time_ms": None if arrival is None else arrival / MS,
        "dp_rank": request.rank,
        "e2e_latency_ms": (last - arrival) / MS if request.status == "completed" else None,
        "first_admission_g1_reused_input_tokens": request.first_g1_tokens,
        "first_admission_host_reused_input_tokens": request.first_host_tokens,
        "first_admission_reused_input_tokens": request.first_reused_tokens,
        "first_admit_ms": None if admit is None else admit / MS,
        "first_token_ms": None if first is None else first / MS,
        "id": spec.name or uuid, "index": spec.index, "input_length": spec.prompt_len,
        "itl_ms": math.fsum([gap / MS * count for gap, count in runs]) / gaps if gaps else None,
        "last_token_ms": None if last is None else last / MS,
        "output_length": request.generated,
        "readmission_count": sum([a["is_readmission"] for a in history]),  # (bools: their sum is an int)
        "requested_output_length": spec.requested_output_len or spec.output_len,
        "reused_input_tokens": request.reused_tokens,
        "session_id": spec.session_id,
        "terminal_reason": request.reason or None, "terminal_status": request.status,
        "terminal_time_ms": None if end is None else end / MS,
        "ttft_ms": (first - arrival) / MS if first is not None else None,
        "ttst_ms": (second - first) / MS if second is not None else None,
        "turn_index": spec.turn_index, "uuid": uuid,
    }
    if request.pd is not None and request.pd.prefill_rank is not None:
        record.update(_pd_fields(request, request.pd))
    return record


def _entry(admission: dict) -> dict:
    """An admission's record: its fields, its time in ms in place of ns (the key order is the encoder's, sorted)."""
    entry = admission.copy()
    at = entry.pop("at_ns")
    entry["at_ms"] = None if at is None else at / MS
    return entry


def admission_history(request: Request) -> list[dict]:
    """The request's admissions in time order.  In P/D the decode rank's activation of a handed-off request is one
    of them (AISimulate lists it: pool decode, nothing reused, not a readmission; the spec's field table is silent
    on it), numbered among the others; readmissions on either side follow in order (facts §33)."""
    entries = list(map(_entry, request.admissions))
    pd = request.pd
    if pd is not None and pd.decode_admit_ns is not None and pd.decode_rank is not None:
        at = pd.decode_admit_ns
        # after the prefill admissions, before decode readmits
        position = sum(1 for a in request.admissions if a["at_ns"] <= at)
        entries.insert(position, {"admission_ordinal": 0, "pool": pd.decode_rank.name, "at_ms": _ms(at),
                                  "reused_input_tokens": 0, "g1_reused_input_tokens": 0,
                                  "host_reused_input_tokens": 0, "is_readmission": False})
        for ordinal, entry in enumerate(entries):
            entry["admission_ordinal"] = ordinal
    return entries


def _pd_fields(request: Request, pd) -> dict:
    decode = pd.decode_rank
    return {
        "prefill_worker_idx": pd.prefill_rank.worker, "prefill_dp_rank": pd.prefill_rank.index,
        "decode_worker_idx": decode.worker if decode else None, "decode_dp_rank": decode.index if decode else None,
        "prefill_admit_ms": _ms(request.first_admit_ns), "prefill_done_ms": _ms(pd.prefill_done_ns),
        "destination_reserved_ms": _ms(pd.reserved_ns), "destination_activated_ms": _ms(pd.activated_ns),
        "decode_admit_ms": _ms(pd.decode_admit_ns), "source_released_ms": _ms(pd.source_released_ns),
        # when the source began to hold the prompt's blocks for the transfer (its prefill's end), as AISimulate's
        # field (an instant; the spec does not define it): the hold lasts until source_released_ms
        "source_held_ms": _ms(pd.prefill_done_ns) if pd.source_released_ns is not None else None,
        # AISimulate's field (the spec's table is silent): the largest reuse of the request's readmissions on the
        # decode rank (its activation reuses nothing), 0 without one; what the decode rank held when it reserved
        # is kvreplay's decode_cached_input_tokens (the prefix destination_missing does not transfer)
        "decode_reused_input_tokens": None if pd.decode_reused_tokens is None else max(
            (a["reused_input_tokens"] for a in request.admissions if a["at_ns"] > (pd.decode_admit_ns or 0)
             and pd.decode_admit_ns is not None), default=0),
        "decode_cached_input_tokens": pd.decode_reused_tokens,
        "kv_transfer_tokens": pd.transfer_tokens if pd.decode_reused_tokens is not None else None,
    }


def summary(log: RequestLog, end_ns: int, policy: str = "lru", cut: bool = False) -> dict:
    """The summary of a finished replay, from its request log's aggregates.  `cut`: a time limit stopped it at
    `end_ns`; its duration then ends at its last completion, as AISimulate's (facts §13)."""
    if cut and log.last_end_ns is not None:
        end_ns = log.last_end_ns
    start_ns = log.start_ns or 0
    duration_s = max(end_ns - start_ns, 0) / 1e9
    input_tokens, output_tokens = log.input_tokens, log.output_tokens
    rejected = log.statuses.get("rejected", 0)
    out = {
        "num_requests": log.total,
        "completed_requests": log.completed,
        "rejected_requests": rejected,
        "incomplete_requests": log.total - log.completed - rejected,
        "duration_ms": duration_s * 1e3,
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput_rps": log.completed / duration_s if duration_s else None,
        "output_throughput_tok_s": output_tokens / duration_s if duration_s else None,
        "total_throughput_tok_s": (input_tokens + output_tokens) / duration_s if duration_s else None,
        "committed_prefill_tokens": log.committed,
        # each request counts once, with its largest reuse over its prefill admissions (spec: field table)
        "prefix_cache_reused_ratio": log.reused / input_tokens if input_tokens else None,
        "first_admission_prefix_cache_reused_ratio": log.first_reused / input_tokens if input_tokens else None,
        "first_admission_g1_reused_tokens": log.first_reused - log.first_host,
        "first_admission_host_reused_tokens": log.first_host,
        "kv_eviction_policy": policy,
        "kv_eviction_assumption": EVICTION_ASSUMPTIONS[policy],
        "preemptions": log.preemptions,
    }
    for name, runs in log.latencies.runs().items():
        out.update(weighted_stats(name, runs))
    return out


def latency_samples(completed: list[Request]) -> dict[str, list[tuple[float, int]]]:
    """Each latency's sample (ms) over `completed` requests, as (value, count) runs, in the summary's order."""
    samples = LatencySamples()
    for request in completed:
        samples.add(request)
    return samples.runs()
