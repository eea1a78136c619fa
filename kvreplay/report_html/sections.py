"""The report's sections for one run: each is (title, body HTML), built from data.py's numbers.

Sections whose inputs a run lacks are either skipped (miss classes and the
miss-ratio curve, when the summary has no `miss_classes` / `miss_ratio_curve`;
P/D transfers without P/D) or say which capture flag would add them.
"""
from __future__ import annotations

from . import data, figures, page
from .figures import salt_of

NEEDS_REQUESTS = "requests.jsonl is absent: rerun with --capture-per-request (or predict --report)"
NEEDS_TIMELINE = "timeline.jsonl is absent: rerun with --capture-timeline (or predict --report)"


def _plot(title: str, svg: str) -> str:
    return page.figure(svg, title)


KEY_FIELDS = ("num_requests", "completed_requests", "rejected_requests", "duration_ms", "request_throughput_rps",
              "output_throughput_tok_s", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_e2e_latency_ms",
              "p99_e2e_latency_ms", "prefix_cache_reused_ratio", "first_admission_prefix_cache_reused_ratio",
              "first_admission_g1_reused_tokens", "first_admission_host_reused_tokens", "preemptions")


def summary_section(run) -> tuple[str, str]:
    """The headline fields, then every field (a <details> element: folded, with no script)."""
    key = [[name, run.summary[name]] for name in KEY_FIELDS if name in run.summary]
    rows = [[name, value] for name, value in data.flatten(run.summary)]
    return "Summary", page.table(["field", "value"], key) + \
        f"<details><summary>every field ({len(rows)})</summary>{page.table(['field', 'value'], rows)}</details>"


def stages_section(run) -> list[tuple[str, str]]:
    """opal runs: each stage's statistics side by side."""
    stages = run.summary.get("stages")
    if not isinstance(stages, list) or not stages:
        return []
    columns = [dict(data.flatten(stage, skip=())) for stage in stages]
    fields = dict.fromkeys(name for column in columns for name in column)  # (each stage's in sorted order)
    rows = [[name, *(column.get(name) for column in columns)] for name in fields]
    return [("Stages", page.table(["field", *(f"stage {k}" for k in range(len(stages)))], rows))]


def latency_section(run) -> tuple[str, str]:
    body = [] if run.has_requests else [page.note(NEEDS_REQUESTS)]
    for label, field in data.LATENCIES if run.has_requests else ():
        title = f"{label} CDF"
        body.append(_plot(title, figures.cdf(salt_of(title), [(run.name, data.latency(run, field))],
                                             f"{label} (ms)")))
    exact = data.itl_cdf(run.summary)
    xs, qs = exact or data.percentile_points(run.summary, "itl")
    if xs:
        title = "ITL CDF"
        label = run.name if exact else f"{run.name} (through the summary's percentiles)"
        svg = figures.lines(salt_of(title), xs, [(label, qs)], "ITL: every gap between tokens (ms)",
                            "fraction of gaps", step=exact is not None)
        body.append(_plot(title, svg))
    return "Latency distributions", "".join(body)


def reuse_section(run) -> tuple[str, str]:
    if not run.has_requests:
        return "Reuse over time", page.note(NEEDS_REQUESTS)
    xs, width, series = data.reuse_bins(run)
    title = "Prompt tokens by source over time"
    svg = figures.stacked_bars(salt_of(title), xs, width, series, "first admission (s)", "prompt tokens")
    totals = [[name, int(sum(ys))] for name, ys in series]
    kvcr = run.summary.get("kvcr")
    extra = page.note(f"KVCR pulls: {kvcr.get('blocks')} blocks, {kvcr.get('loaded_blocks')} loaded") \
        if isinstance(kvcr, dict) else ""
    return "Reuse over time", _plot(title, svg) + page.table(["source", "prompt tokens"], totals) + extra


def timeline_section(run) -> list[tuple[str, str]]:
    if not run.has_timeline or not run.timeline:
        return [("Occupancy, batch and queue over time", page.note(NEEDS_TIMELINE))]
    t = data.timeline_series(run)
    occupancy = [("G1 held by requests", t["g1_held"]), ("G1 holding a prefix", t["g1_cached"])]
    occupancy += [(f"{label} resident", ys) for label, ys in t["tiers"].items()]
    plots = [("Occupancy over time", occupancy, "fraction of capacity"),
             ("Batch size over time", [("running requests", t["batch"])], "requests"),
             ("Queue length over time", [("waiting requests", t["queue"])], "requests"),
             ("Preemptions over time", [("preemptions so far", t["preemptions"])], "preemptions")]
    body = "".join(_plot(title, figures.lines(salt_of(title), t["t"], series, "virtual time (s)", ylabel,
                                              step=True)) for title, series, ylabel in plots)
    out = [("Occupancy, batch and queue over time", body)]
    load = data.worker_load(run)
    names = list(load)
    title = "Per-worker load"
    svg = figures.bars(salt_of(title), names, [("mean batch", [load[n][0] for n in names]),
                                               ("mean queue", [load[n][1] for n in names])], "requests")
    per_rank = data.requests_per_rank(run) if run.has_requests else {}
    table = page.table(["rank", "requests admitted"], [[k, v] for k, v in per_rank.items()]) if per_rank else ""
    out.append((title, _plot(title, svg) + table))
    return out


def transfer_section(run) -> list[tuple[str, str]]:
    series = [(name, values) for name, values in data.transfers(run).items() if values]
    if not series:
        return []
    title = "P/D transfer times"
    return [(title, _plot(title, figures.cdf(salt_of(title), series, "ms")))]


def _misses(record: dict) -> str:
    """A request's missed tokens by class (predict --explain-misses), the classes that have any."""
    classes = record.get("miss_classes")
    return ", ".join(f"{k} {v}" for k, v in sorted(classes.items()) if v) if isinstance(classes, dict) else "-"


def sample_section(run) -> tuple[str, str]:
    if not run.has_requests:
        return "Requests (a sample)", page.note(NEEDS_REQUESTS)
    rows = []
    for r in data.sample(run):
        sources = data.sources_of(r)
        history = "; ".join(f"{a.get('at_ms', 0):.6g} ms: {a.get('g1_reused_input_tokens', 0)} G1 + "
                            f"{a.get('host_reused_input_tokens', 0)} restored"
                            for a in r.get("admission_history") or [])
        rows.append([r.get("index"), str(r.get("id"))[:18], r.get("terminal_status"), r.get("arrival_time_ms"),
                     r.get("ttft_ms"), r.get("e2e_latency_ms"), r.get("input_length"),
                     ", ".join(f"{k} {v}" for k, v in sources.items()), _misses(r), r.get("admission_count"), history])
    header = ["index", "id", "status", "arrival (ms)", "TTFT (ms)", "E2E (ms)", "prompt", "reused by source",
              "missed by class", "admissions", "admission history"]
    return "Requests (a sample)", page.note(f"{len(rows)} of {len(run.requests)} requests, evenly spaced") + \
        page.table(header, rows)


def miss_sections(run) -> list[tuple[str, str]]:
    out = []
    classes = run.summary.get("miss_classes")
    if isinstance(classes, dict) and classes:
        names = sorted(classes)
        total = sum(classes.values()) or 1
        title = "Why prompt tokens were not reused"
        svg = figures.bars(salt_of(title), names, [("tokens", [classes[n] for n in names])], "missed prompt tokens")
        table = page.table(["class", "tokens", "share"], [[n, classes[n], classes[n] / total] for n in names])
        out.append((title, _plot(title, svg) + table))
    curve = data.curve_of(run.summary)
    if curve is not None:
        title = "Miss-ratio curve"
        out.append((title, _plot(title, figures.render(salt_of(title), lambda ax: _curve(ax, curve))) +
                    _gap(run.summary)))
    return out


def _gap(summary: dict) -> str:
    """Where the replay departs from the ideal LRU at its capacity: the blocks the ideal cache hit and the replay
    missed, by the class the miss breakdown gave them, and those only the replay hit."""
    gap = (summary.get("miss_ratio_curve") or {}).get("gap") if isinstance(summary.get("miss_ratio_curve"), dict) \
        else None
    if not isinstance(gap, dict):
        return ""
    missed = {name: tokens for name, tokens in sorted(gap["missed_by_replay"].items()) if tokens}
    rows = [["ideal LRU hit tokens", gap["ideal_lru_hit_tokens"]], ["replay hit tokens", gap["replay_hit_tokens"]],
            ["gap (ideal - replay)", gap["ideal_lru_hit_tokens"] - gap["replay_hit_tokens"]]]
    rows += [[f"ideal hit, replay missed: {name}", tokens] for name, tokens in missed.items()]
    rows.append(["replay hit, ideal missed", gap["hit_by_replay_only"]])
    body = page.note(f"At the replay's capacity ({gap['capacity_blocks']} G1 blocks over all ranks), by why the "
                     "replay missed each block the ideal cache hit") + page.table(["", "prompt tokens"], rows)
    if missed:
        title = "Gap to the ideal LRU by class"
        body += _plot(title, figures.bars(salt_of(title), list(missed), [("tokens", list(missed.values()))],
                                          "prompt tokens the ideal LRU hit and the replay missed"))
    return body


def _curve(ax, curve: dict) -> None:
    """The ideal LRU curve (a log capacity axis: its points are spaced so), the replay's point and Belady's."""
    ax.plot([c for c, _ in curve["lru"]], [h for _, h in curve["lru"]], marker=".", label="ideal LRU (one pass)")
    for key, label, marker in (("replay", "this replay (first admission)", "o"), ("belady", "Belady bound", "^")):
        if curve[key]:
            ax.plot([c for c, _ in curve[key]], [h for _, h in curve[key]], marker, markersize=7, label=label)
    if min(c for c, _ in curve["lru"]) > 0:
        ax.set_xscale("log")
    ax.set_xlabel("G1 capacity (blocks)")
    ax.set_ylabel("prefix hit ratio (of prompt tokens)")
    ax.legend(loc="lower right", fontsize=7)


def run_sections(run) -> list[tuple[str, str]]:
    """Every section of one run's report, in the page's order."""
    out = [summary_section(run), *stages_section(run), latency_section(run), reuse_section(run)]
    out += miss_sections(run)
    out += timeline_section(run)
    out += transfer_section(run)
    out.append(sample_section(run))
    return out
