"""What the plots and tables show, taken out of a `Run`: plain lists of numbers, the same for report and diff.

Reuse by source: opal runs name the tokens each cache served a request
(`tier_hit_tokens`: APC first, then each KVC tier); other runs split a
request's first admission between G1 and each source behind it (G2's own
blocks, G3 reads into G2, KVCR pulls: the admission's `host_reused_by_source`,
which the tiers' restore path writes).
"""
from __future__ import annotations

# (a request's itl_ms is its mean gap between tokens: its TPOT; the pooled ITL sample is in the summary only)
LATENCIES = (("TTFT", "ttft_ms"), ("TPOT", "itl_ms"), ("E2E", "e2e_latency_ms"))
PERCENTILE_POINTS = (("min", 0.0), ("median", 0.5), ("p75", 0.75), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99),
                     ("max", 1.0))
SKIPPED_SECTIONS = ("stages", "miss_ratio_curve", "itl_gap_counts_ns")  # (shown by their own sections, not as summary rows)
BINS = 40
SAMPLE = 20


def flatten(value, prefix: str = "", skip=SKIPPED_SECTIONS) -> list[tuple[str, object]]:
    """Every scalar of a summary as (dotted path, value), in sorted key order; list entries by name or index;
    top-level sections in `skip` left out."""
    if isinstance(value, dict):
        out = []
        for key in sorted(value):
            if not prefix and key in skip:
                continue
            out += flatten(value[key], f"{prefix}.{key}" if prefix else str(key), skip)
        return out
    if isinstance(value, list):
        out = []
        for i, item in enumerate(value):
            name = item.get("name", i) if isinstance(item, dict) else i
            out += flatten(item, f"{prefix}[{name}]", skip)
        return out
    return [(prefix, value)]


def latency(run, field: str) -> list[float]:
    return [r[field] for r in run.completed() if isinstance(r.get(field), (int, float))]


def itl_cdf(summary: dict) -> tuple[list[float], list[float]] | None:
    """The exact ITL CDF from the summary's `itl_gap_counts_ns` ([gap ns, count] pairs; --capture-timeline):
    each distinct gap (ms) and the fraction of gaps at most that long; None when the run has no such field."""
    pairs = summary.get("itl_gap_counts_ns")
    if not isinstance(pairs, list) or not pairs:
        return None
    total = sum(count for _, count in pairs)
    xs, ys, seen = [], [], 0
    for gap, count in pairs:
        seen += count
        xs.append(gap / 1e6)
        ys.append(seen / total)
    return xs, ys


def percentile_points(summary: dict, name: str) -> tuple[list[float], list[float]]:
    """A pooled sample's CDF through the summary's percentiles (ITL: every gap, which requests.jsonl lacks)."""
    points = [(summary.get(f"{label}_{name}_ms"), q) for label, q in PERCENTILE_POINTS]
    points = [(x, q) for x, q in points if isinstance(x, (int, float))]
    return [x for x, _ in points], [q for _, q in points]


def curve_of(summary: dict) -> dict | None:
    """The miss-ratio curve as ratios of prompt tokens: `lru` [(capacity, hit ratio)], the replay's own point and
    Belady's (each a list of (capacity, ratio)).  Read from predict --explain-misses' section (points of
    [capacity_blocks, hit_tokens, hit_ratio], `replay`, `belady`) or from a plain [[capacity, hit_ratio], ...]."""
    curve = summary.get("miss_ratio_curve")
    if isinstance(curve, list) and curve:
        return {"lru": sorted((float(p[0]), float(p[-1])) for p in curve), "replay": [], "belady": []}
    if not isinstance(curve, dict) or not curve.get("points"):
        return None
    prompt = curve.get("prompt_tokens") or summary.get("total_input_tokens") or 1
    replay = curve.get("replay")
    return {"lru": sorted((float(p[0]), float(p[-1])) for p in curve["points"]),
            "replay": [(replay["capacity_blocks"], replay["hit_tokens"] / prompt)] if isinstance(replay, dict) else [],
            "belady": [(c, hits / prompt) for c, hits in curve.get("belady") or []]}


SOURCE_NAMES = {"g2": "G2", "g3": "G3 (read into G2)", "peer": "KVCR pulls"}
HOST_CHAIN = "G2/G3/KVCR (host chain)"  # (records written before admissions split it by source)


def sources_of(record: dict) -> dict[str, int]:
    """Prompt tokens a request found cached, by where they came from: its first admission's G1 hits and what
    each source behind G1 restored (`host_reused_by_source` of the admission)."""
    hits = record.get("tier_hit_tokens")
    if isinstance(hits, dict):
        return {("APC (G1)" if name == "apc" else f"opal {name}"): int(n) for name, n in hits.items()}
    out = {"G1": record.get("first_admission_g1_reused_input_tokens") or 0}
    host = record.get("first_admission_host_reused_input_tokens") or 0
    history = record.get("admission_history") or [{}]
    split = history[0].get("host_reused_by_source")
    if isinstance(split, dict) and sum(split.values()) == host:
        for label in sorted(split, key=lambda name: (list(SOURCE_NAMES) + [name]).index(name)):
            out[SOURCE_NAMES.get(label, label)] = split[label]
    elif host:
        out[HOST_CHAIN] = host
    return out


def admitted(run) -> list[dict]:
    return [r for r in run.requests if r.get("admission_count")]


def span_ms(run) -> float:
    ends = [r.get("terminal_time_ms") or 0.0 for r in run.requests] + [run.summary.get("duration_ms") or 0.0]
    return max(ends + [1e-3])


def reuse_bins(run, span: float | None = None) -> tuple[list[float], float, list[tuple[str, list[float]]]]:
    """Tokens reused per source and tokens computed, per bin of first-admission time (bin starts in s)."""
    span = span or span_ms(run)
    width = span / BINS
    names: dict[str, None] = {}
    rows = admitted(run)
    for r in rows:
        names.update(dict.fromkeys(sources_of(r)))
    series = {name: [0.0] * BINS for name in names}
    computed = [0.0] * BINS
    for r in rows:
        at = r.get("first_admit_ms") if r.get("first_admit_ms") is not None else r.get("arrival_time_ms") or 0.0
        k = min(BINS - 1, int(at / width))
        found = sources_of(r)
        for name, tokens in found.items():
            series[name][k] += tokens
        computed[k] += max(0, (r.get("input_length") or 0) - sum(found.values()))
    out = [(name, ys) for name, ys in series.items() if any(ys)] + [("computed (not reused)", computed)]
    return [k * width / 1e3 for k in range(BINS)], width / 1e3, out


def reuse_ratio_bins(run, span: float) -> tuple[list[float], list[float]]:
    """The fraction of prompt tokens reused, per bin of first-admission time."""
    xs, _, series = reuse_bins(run, span)
    computed = series[-1][1]
    reused = [sum(ys[k] for _, ys in series[:-1]) for k in range(BINS)]
    return xs, [r / (r + c) if r + c else 0.0 for r, c in zip(reused, computed)]


def sample(run) -> list[dict]:
    """SAMPLE requests evenly spaced in request order (all of them when fewer)."""
    rows = sorted(run.requests, key=lambda r: (r.get("index", 0), str(r.get("id"))))
    if len(rows) <= SAMPLE:
        return rows
    return [rows[round(i * (len(rows) - 1) / (SAMPLE - 1))] for i in range(SAMPLE)]


def transfers(run) -> dict[str, list[float]]:
    """P/D: the KV handoff (prefill done to decode admitted) and how long the prefill rank held the KV."""
    handoff = [r["decode_admit_ms"] - r["prefill_done_ms"] for r in run.requests
               if r.get("decode_admit_ms") is not None and r.get("prefill_done_ms") is not None]
    held = [r["source_held_ms"] for r in run.requests if r.get("source_held_ms") is not None]
    return {"handoff (prefill done to decode admit)": handoff, "prefill rank holds the KV": held}


def timeline_series(run) -> dict:
    """Per sample: time (s), G1 held / cached fractions, each tier's fill, batch, queue, preemptions."""
    xs, g1_held, g1_cached, batch, queue, preempt = [], [], [], [], [], []
    tiers: dict[str, list[float]] = {}
    for k, s in enumerate(run.timeline):
        ranks = s.get("ranks", [])
        capacity = sum(r["g1_capacity_blocks"] for r in ranks) or 1
        xs.append(s["t_ms"] / 1e3)
        g1_held.append(sum(r["g1_held_blocks"] for r in ranks) / capacity)
        g1_cached.append(sum(r["g1_cached_blocks"] for r in ranks) / capacity)
        batch.append(sum(r["running"] for r in ranks))
        queue.append(sum(r["waiting"] for r in ranks))
        preempt.append(sum(r["preemptions"] for r in ranks))
        for label, tier in s.get("tiers", {}).items():
            tiers.setdefault(label, [0.0] * k).append(tier["resident_blocks"] / (tier["capacity_blocks"] or 1))
        for ys in tiers.values():
            ys.extend([0.0] * (k + 1 - len(ys)))
    return {"t": xs, "g1_held": g1_held, "g1_cached": g1_cached, "tiers": tiers, "batch": batch, "queue": queue,
            "preemptions": preempt}


def worker_load(run) -> dict[str, tuple[float, float]]:
    """Per worker: mean batch and mean queue over the timeline's samples."""
    totals: dict[str, list[float]] = {}
    for s in run.timeline:
        seen: dict[str, list[float]] = {}
        for r in s.get("ranks", []):
            entry = seen.setdefault(f"worker {r['worker']}", [0.0, 0.0])
            entry[0] += r["running"]
            entry[1] += r["waiting"]
        for name, (running, waiting) in seen.items():
            total = totals.setdefault(name, [0.0, 0.0])
            total[0] += running
            total[1] += waiting
    n = len(run.timeline) or 1
    return {name: (v[0] / n, v[1] / n) for name, v in sorted(totals.items(), key=lambda kv: int(kv[0].split()[1]))}


def requests_per_rank(run) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in admitted(run):
        name = f"rank {r.get('prefill_dp_rank', r.get('dp_rank'))}"
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))
