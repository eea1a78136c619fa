"""The work an opal replay does per second of virtual time, estimated from the plan before it runs.

An opal run does work that grows with the virtual time it spans, not with its
requests: `opal_stats.json` holds one entry a simulated second for every worker
(runtime/outputs/opal_stats.py), the APC monitor checks every rank each interval
and the scaling router checks every second.  A config valid in every field can
therefore run for hours on a handful of requests: a CPUMemory tier of 1e-12 GB/s
(each chunk copy takes 60,000 years), a request rate of 1e-7 per second, a GPU
of 1e-7 TFLOP/s.  The span is estimated as the sum of three upper bounds, each
with the field that sets it:

- the arrivals: a rate stage's requests over its rate, a trace's or OTel file's
  last timestamp (stages run one after another);
- the compute, as if every request ran alone: its prompt's FLOPs at the GPU's
  peak, and one weight read at its memory bandwidth per output token;
- the copies: every token's KV bytes through each KVC tier's bandwidth.

Each bound is far above a real run's time (batching shares the weight reads),
which only matters when it nears the work limit; it is there to stop what would
run for days.
"""
from __future__ import annotations

from .opal_records import OpalPlan, OtelStage, RateStage, TraceStage
from .plan_records import ReplayPlan
from .timing_records import RooflineTiming

NS = 1e9
SLOW_FIELDS = ("tflops", "mem_bw_TBps", "bandwidth_GBps")  # what the span's compute and copy parts blame


def _arrival_seconds(opal: OpalPlan) -> float:
    seconds = 0.0
    for stage in opal.stages:
        if isinstance(stage, RateStage):
            seconds += stage.total_requests / stage.request_rate
        elif isinstance(stage, TraceStage):
            seconds += max((row.timestamp_ns for row in stage.rows), default=0) / NS
        elif isinstance(stage, OtelStage):
            seconds += max((turn.end_ns for s in stage.sessions for turn in s.turns), default=0) / NS
    return seconds


def _compute_seconds(timing, prompt: int, output: int) -> tuple[float, str]:
    if not isinstance(timing, RooflineTiming):
        return 0.0, "/worker/hw"
    flops = 2 * timing.active_params * prompt / timing.peak_flops
    reads = output * timing.weight_bytes / (timing.memory_bandwidth_gbps * NS)
    return flops + reads, "/worker/hw/tflops" if flops >= reads else "/worker/hw/mem_bw_TBps"


def _copy_seconds(opal: OpalPlan, tokens: int) -> tuple[float, str]:
    seconds, slowest, pointer = 0.0, 0.0, "/kvc"
    for tier in opal.kvc.tiers:
        if tier.link.bandwidth_gbps > 0:
            taken = tokens * opal.kv_bytes_per_token / (tier.link.bandwidth_gbps * NS)
            seconds += taken
            if taken > slowest:
                slowest, pointer = taken, f"/kvc/{tier.name}/bandwidth_GBps"
    return seconds, pointer


def per_second_work(plan: ReplayPlan, prompt: int, output: int) -> tuple[int, str, str | None]:
    """(steps, how they add up in words, the pointer of the largest part) of what an opal plan does per virtual
    second over its estimated span; (0, "", None) for any other plan."""
    opal = plan.opal
    if opal is None:
        return 0, "", None
    parts = [(_arrival_seconds(opal), "/workload/stages"), _compute_seconds(plan.roles[0].timing, prompt, output),
             _copy_seconds(opal, prompt + output)]
    seconds = sum(part for part, _ in parts)
    if opal.simulation_time_ns is not None:
        seconds = min(seconds, opal.simulation_time_ns / NS)
    workers = opal.router.max_workers if opal.router.scaling else max(n for _, n in plan.roles[0].replica_steps)
    per_second = workers + 1  # a stats entry for each worker and the stage
    if opal.apc is not None:
        per_second += workers * plan.roles[0].attention_data * NS / max(opal.apc.check_interval_ns, 100_000_000)
    if opal.router.scaling:
        per_second += NS / opal.router.check_interval_ns
    steps = int(min(seconds * per_second, 1e30))  # (bounded: a float past int range never reaches the message)
    pointer = max(parts)[1]
    return steps, f"about {_seconds(seconds)} of virtual time at {per_second:.3g} steps a second", pointer


def _seconds(seconds: float) -> str:
    """`8.76e6 years`, `2 days`, `4,059 s`: a span as a person reads it."""
    years = seconds / (86_400 * 365)
    if years >= 1:
        return f"{years:.3g}".replace("e+0", "e").replace("e+", "e") + " years"
    if seconds >= 2 * 86_400:
        return f"{seconds / 86_400:.0f} days"
    return f"{seconds:,.0f} s" if seconds >= 10 else f"{seconds:.3g} s"
