"""The outputs of an opal config's run: prediction.json's `stages` section and opal's own files.

`StageLedger` watches the replay (an after-instant hook) and takes a snapshot
of the caches' cumulative counters whenever a stage starts, and one at the
end, so each stage reports what happened during it.  `opal_outputs` then
builds, per stage, kvreplay's statistics (stage_stats.py) and opal's
`stage_N/opal_stats.json` (opal_stats.py), plus `sim_config.json` (the config
as loaded, with opal's stage defaults) and `simulation.log` (sim_log.py).
"""
from __future__ import annotations

import datetime
import json
from itertools import chain

from ..tiers import apc_log
from . import metrics, opal_stats, sim_log
from .request_log import RequestLog
from .stage_stats import hit_tokens, stage_entry

STAGE_TYPES = {"RateStage": None, "TraceStage": "trace", "OtelStage": "otel"}
COUNTERS = ("write_through_stores", "retirement_stores", "demotions", "promotions", "dropped_chunks")


def counters(replay) -> dict:
    """The caches' cumulative counters now, over every rank (and every worker's KV-cache manager)."""
    pools = [rank.pool for rank in replay.ranks()]
    managers = {id(c): c for c in (rank.chain.counters for rank in replay.ranks()) if c is not None}
    out = {"inline": sum(p.evictions - p.proactive_evictions for p in pools),
           "proactive": sum(p.proactive_evictions for p in pools), "ttl_skipped": sum(p.ttl_skipped for p in pools)}
    out.update({name: sum(getattr(m, name) for m in managers.values()) for name in COUNTERS})
    return out


def occupancy(replay) -> dict:
    """Each KVC tier's resident and capacity chunks (a shared tier once)."""
    pools: dict = {}
    for rank in replay.ranks():
        for tier in rank.chain.tiers:
            pools.setdefault(tier.label, {})[id(tier)] = tier
    return {name: {"resident_chunks": sum(t.resident for t in found.values()),
                   "capacity_chunks": sum(t.capacity for t in found.values())} for name, found in pools.items()}


class StageLedger:
    def __init__(self, replay):
        self.replay = replay
        zero = counters(replay)
        self.snapshots = [zero]  # at each stage's start, then at the end
        self.occupancy = []  # at each stage's end
        self.seen = 0

    def after_instant(self, now: int) -> None:
        while self.seen < self.replay.traffic.stage:
            self.snapshots.append(counters(self.replay))
            self.occupancy.append(occupancy(self.replay))
            self.seen += 1

    def activity(self, stage: int) -> dict:
        before, after = self.snapshots[stage], self.snapshots[stage + 1]
        delta = {name: after[name] - before[name] for name in after}
        return {"evictions": {kind: delta.pop(kind) for kind in ("inline", "proactive", "ttl_skipped")}, **delta,
                "tier_occupancy": self.occupancy[stage]}

    def close(self) -> None:
        self.after_instant(0)
        self.snapshots.append(counters(self.replay))
        self.occupancy.append(occupancy(self.replay))


def request_record(request) -> dict:
    """A request's requests.jsonl record in an opal run: every run's fields, plus its stage and the tokens each
    cache served it."""
    apc, tiers = hit_tokens(request)
    return {**metrics.request_record(request), "stage": request.spec.stage, "tier_hit_tokens": {"apc": apc, **tiers}}


def attach_ledger(replay) -> StageLedger:
    """Before `run`: the stage ledger, the workers' busy spans, and APC's eviction records for the log."""
    if replay.apc is not None:
        apc_log.collect(replay)
    for worker in replay.workers:  # (opal_stats' GPU utilisation; other runs keep no spans)
        worker.busy_spans = []
    ledger = StageLedger(replay)
    replay.after_instant.append(ledger.after_instant)
    return ledger


def default_folder() -> str:
    """Where opal puts a run: simulation-runs/sim-YY-MM-DD_HH_MM_SS (the wall clock names the folder only)."""
    return f"simulation-runs/sim-{datetime.datetime.now().strftime('%y-%m-%d_%H_%M_%S')}"


def stage_name(index: int, stage, config: dict) -> str:
    """opal's name of a stage in its log: `Workload(Uniform Rate).0`, `Workload(trace hello.jsonl)`, ..."""
    kind = type(stage).__name__
    if kind == "RateStage":
        return f"Workload({'Uniform Rate' if stage.kind == 'uniform' else 'ExponentialReqRate'}).{index}"
    path = config["workload"]["stages"][index]["workload_params"]["trace_file"]
    return f"Workload({STAGE_TYPES[kind]} {path.replace(chr(92), '/').rsplit('/', 1)[-1]})"


def sim_config(config: dict) -> str:
    """The config as opal saves it: every stage with `total_requests` and `time_duration_sec` (-1 unless given)."""
    for stage in config.get("workload", {}).get("stages", []):
        params = stage.setdefault("workload_params", {})
        params.setdefault("total_requests", -1)
        params.setdefault("time_duration_sec", -1)
    return json.dumps(config, indent=4)


def opal_outputs(replay, opal, ledger: StageLedger, end_ns: int, output_dir: str) -> tuple[list, dict]:
    """(prediction.json's `stages`, {relative path: bytes} of opal's layout)."""
    config = json.loads(opal.config_json)
    tier_names = [tier.name for tier in opal.kvc.tiers]
    rank = replay.ranks()[0]
    block_size, blocks = rank.block_size, rank.pool.capacity
    initial = [w for w in replay.workers if any(joined == 0 for joined, _, _ in w.periods)]
    events = [(0, sim_log.line(0, text)) for text in sim_log.startup_lines(opal, initial, block_size, blocks,
                                                                            output_dir)]
    joins = sorted(joined for w in replay.workers for joined, _, _ in w.periods if joined)
    events += [(at, sim_log.line(at, f"** adding 1 workers, so far now {len(initial) + n}"))
               for n, at in enumerate(joins, 1)]  # (opal's wording, scaling one worker at a time)
    bounds = replay.traffic.stage_bounds
    # when the log counted every completed request, a stage that completed as many has exactly the log's
    log = replay.log if type(replay.log) is RequestLog and \
        replay.log.completed == sum(r.status == "completed" for r in replay.requests) else None
    stages, files, printouts = [], {}, []
    for index, stage in enumerate(opal.stages[:len(bounds)]):
        start, end = bounds[index][0], bounds[index][1] if bounds[index][1] is not None else end_ns
        requests = sorted((r for r in replay.requests if r.spec.stage == index), key=lambda r: r.spec.index)
        entry = stage_entry(index, type(stage).__name__, requests, start, end, tier_names, ledger.activity(index),
                            log)
        totals: dict = {}
        for request in requests:
            apc, tiers = hit_tokens(request)
            for name, tokens in sim_log.tier_tokens(request, apc, tiers).items():
                totals[name] = totals.get(name, 0) + tokens
            events += [(at, sim_log.line(at, text)) for at, text in sim_log.request_lines(request, apc, tiers,
                                                                                            block_size)]
        name = stage_name(index, stage, config)
        events.append((start, sim_log.line(start, f"Stating the execution of stage {index} with type: {name}")))
        if bounds[index][1] is not None:
            events.append((end, sim_log.line(end, f"Stage {index} with type: {name} finished")))
        stats = opal_stats.stage_stats(requests, start, end, replay.workers, totals)
        files[f"stage_{index}/opal_stats.json"] = (piece.encode() for piece in opal_stats.compact(stats))
        stages.append(entry)
        printouts += sim_log.printout(index, entry, totals)
    if replay.apc is not None:
        block_bytes = block_size * opal.kv_bytes_per_token
        first = opal.kvc.tiers[0].name if opal.kvc.tiers else None
        events += [(at, sim_log.line(at, text)) for at, _, text in apc_log.eviction_lines(replay, block_bytes, first)]
    events.sort(key=lambda event: event[0])  # (stable: same-instant lines keep the order they were added in)
    lines = [text for _, text in events]
    lines += [sim_log.line(end_ns, "Workload orchestration finished"), sim_log.line(end_ns, "Simulation is finished now!"),
              sim_log.line(end_ns, f"Simulation data is written to {output_dir}")]
    files["sim_config.json"] = sim_config(config).encode()
    files["simulation.log"] = ((line + "\n").encode() for line in chain(lines, printouts))  # (written line by line)
    return stages, files
