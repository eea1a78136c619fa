"""Compile and replay one candidate in-process, the way `kvreplay predict` does, and return its ledger entry.

`evaluate(job)` is the unit every executor runs: a plain function of picklable data, so the process
pool and Ray run exactly the same code and the entry depends on the job alone. A candidate the
compiler rejects is listed with its rule errors and never replayed.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import xxhash

# The metrics a ledger line keeps (all from the prediction summary), plus derived ones (see `_results`).
STATS = ("mean", "median", "p90", "p95", "p99", "max")
METRICS = ("ttft_ms", "tpot_ms", "e2e_latency_ms", "itl_ms")
TOTALS = ("completed_requests", "rejected_requests", "preemptions", "duration_ms", "output_throughput_tok_s",
          "request_throughput_rps", "total_throughput_tok_s", "prefix_cache_reused_ratio")


@dataclass(frozen=True)
class Job:
    index: int
    knobs: dict  # dotted path -> value
    document: bytes  # the concrete candidate config, as JSON
    source: str  # the config's path: diagnostics name it, trace files are read beside it
    max_work: int


def gpus(engine: dict) -> int:
    """GPUs of a deployment: every role's replicas x tensor x pipeline x attention-DP ranks."""
    total = 0
    for worker in (engine.get("workers") or {}).values():
        p = worker.get("parallelism") or {}
        total += p.get("replicas", 1) * p.get("tensor", 1) * p.get("pipeline", 1) * p.get("attention_data", 1)
    return max(total, 1)


def _errors(diagnostics) -> list[dict]:
    return [{"code": d.code, "message": d.message, "path": d.pointer} for d in diagnostics]


def _results(summary: dict, gpu_count: int) -> dict:
    results = {key: summary[key] for key in TOTALS if key in summary}
    for metric in METRICS:
        for stat in STATS:
            key = f"{stat}_{metric}"
            if key in summary:
                results[key] = summary[key]
    results["gpus"] = gpu_count
    results["throughput_per_gpu"] = summary.get("output_throughput_tok_s", 0.0) / gpu_count
    tpot = summary.get("mean_tpot_ms") or 0.0
    results["tokens_per_second_per_user"] = 1000.0 / tpot if tpot > 0 else 0.0
    return results


def evaluate(job: Job, report=None) -> dict:
    """The candidate's ledger entry: knobs, plan hash, status, and its results or errors.
    `report(index, done, total)`, if given, hears how many of the candidate's requests have ended."""
    from ..compiler import work
    from ..compiler.pipeline import compile_bytes

    entry = {"index": job.index, "knobs": job.knobs}
    result = compile_bytes(job.document, job.source, base_dir=Path(job.source).resolve().parent)
    if result.diagnostics:
        return {**entry, "status": "invalid", "errors": _errors(result.diagnostics)}
    canonical = result.plan.canonical_json()
    entry["plan_hash"] = xxhash.xxh3_64_hexdigest(canonical)
    plan = result.plan.records
    if plan is None:
        return {**entry, "status": "invalid", "errors": [{"code": "NOT-REPLAYABLE", "path": "",
                                                           "message": result.plan.not_replayable}]}
    budget = (orjson.loads(job.document).get("recommend") or {}).get("max_gpus")
    used = gpus(orjson.loads(canonical)["engine"])
    if budget is not None and used > budget:  # (not replayed: the deployment is outside the search's budget)
        return {**entry, "status": "over_budget", "errors": [{"code": "RECOMMEND-GPU-BUDGET", "path": "",
                "message": f"the candidate uses {used} GPUs; recommend.max_gpus is {budget}"}]}
    too_much = work.check(plan, job.max_work)
    if too_much:
        return {**entry, "status": "invalid", "errors": _errors(too_much)}
    summary, problem = replay(plan, None if report is None else lambda done, total: report(job.index, done, total))
    if problem:
        return {**entry, "status": "failed", "errors": [{"code": "RUN", "path": "", "message": problem}]}
    return {**entry, "status": "ok", "results": _results(summary, used)}


def replay(plan, report=None) -> tuple[dict | None, str]:
    """(the prediction summary, "") or (None, why the run failed): predict's replay, without its files."""
    from ..runtime.build import ReplayUnsupported, build
    from ..runtime.outputs import metrics, sections
    from ..runtime.outputs.request_log import RequestLog

    try:
        run = build(plan)
    except ReplayUnsupported as error:
        return None, str(error)
    run.log = RequestLog(keep=False, spool=None)
    if report is not None:
        ticks = [0]
        total = run.traffic.request_limit or 0

        def progress(replay) -> None:
            ticks[0] += 1
            if ticks[0] % 256 == 0:  # (often enough to move, rarely enough to cost nothing)
                report(replay.log.total, total)
        run.on_progress = progress
    run.run()
    end_ns = run.close()
    if run.stalled:
        return None, f"the replay stalled with {run.stalled} request(s) unable to progress"
    summary = metrics.summary(run.log, end_ns, plan.eviction_policy, cut=run.stopped_at is not None)
    summary.update(sections.summary_sections(run))
    if not summary["completed_requests"]:
        return None, "no request completed"
    return summary, ""
