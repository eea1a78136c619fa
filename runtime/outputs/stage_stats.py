"""The statistics of each opal workload stage, as prediction.json's `stages` section reports them.

Per stage: its requests (queued, finished, failed), its time span, input and
output tokens, prefix hit tokens and rate, the hit rate of each tier (tokens
it served / the stage's input tokens, APC first, then the KVC tiers in
order: they add up to the prefix hit rate), each request's hit type (apc:
reuse from APC only; tiered: some from a tier; none), TTFT, TPOT, ITL and E2E
(mean, median, p99 in ms, as opal prints them), and what the caches did
during the stage: evictions by kind, write-through and retirement stores,
demotions and promotions, and each tier's occupancy when the stage ended.
A request's hits are those of its first admission.
"""
from __future__ import annotations

from .metrics import latency_samples, weighted_stats

LATENCIES = ("ttft", "tpot", "itl", "e2e_latency")
KEPT = ("mean", "median", "p99")


def hit_tokens(request) -> tuple[int, dict]:
    """(APC tokens, {tier: tokens}) of a request's first admission."""
    tiers = dict(request.tier.served)
    reused = request.first_reused_tokens or 0
    return reused - sum(tiers.values()), tiers


def latency_stats(finished: list, whole=None) -> dict:
    """The latencies over the stage's completed requests; `whole`: the run's LatencySamples, when they are over
    the same requests (a single stage that holds every completed request: its samples need no second pass over
    each request's gaps; the stats sort and sum each sample's runs, so the order they were added in is moot)."""
    samples = whole.runs() if whole is not None else latency_samples(finished)
    out = {}
    for name in LATENCIES:
        stats = weighted_stats(name, samples[name])
        out.update({f"{k}_{name}_ms": stats[f"{k}_{name}_ms"] for k in KEPT})
    return out


def stage_entry(index: int, kind: str, requests: list, start_ns: int, end_ns: int, tier_names: list,
                activity: dict, log=None) -> dict:
    """One stage's statistics; `activity`: what the caches did during it (see StageLedger); `log`: the run's
    RequestLog, whose latency samples are the stage's when every request it completed is the stage's."""
    finished = [r for r in requests if r.status == "completed"]
    whole = log.latencies if log is not None and log.completed == len(finished) else None
    input_tokens = sum(r.spec.prompt_len for r in requests)
    by_tier = dict.fromkeys(["apc", *tier_names], 0)
    types = {"apc": 0, "tiered": 0, "none": 0}
    for request in requests:
        apc, tiers = hit_tokens(request)
        by_tier["apc"] += apc
        for name, tokens in tiers.items():
            by_tier[name] += tokens
        types["tiered" if tiers else "apc" if apc else "none"] += 1
    hits = sum(by_tier.values())
    rate = (lambda tokens: tokens / input_tokens if input_tokens else None)
    return {
        "stage": index, "type": kind,
        "queued_requests": len(requests), "finished_requests": len(finished),
        "failed_requests": len(requests) - len(finished),
        "stage_time_start_s": start_ns / 1e9, "stage_time_end_s": end_ns / 1e9,
        "duration_s": (end_ns - start_ns) / 1e9,
        "input_tokens": input_tokens, "output_tokens": sum(r.generated for r in requests),
        "prefix_hit_tokens": hits, "prefix_hit_rate": rate(hits),
        # a list, so that the order (APC first, then the tiers fastest first) survives prediction.json's sorted keys
        "tier_hits": [{"tier": name, "tokens": tokens, "rate": rate(tokens)} for name, tokens in by_tier.items()],
        "hit_types": types,
        **latency_stats(finished, whole),
        **activity,
    }
