"""The recommendation of a finished sweep: what recommendation.json holds and what stdout shows.

Everything here is a function of the ledger entries alone (no wall clock, no paths inside the JSON),
so a resumed sweep, a pool sweep and a Ray sweep give the same bytes.
"""
from __future__ import annotations

import orjson

from . import pareto


def _brief(entry: dict) -> dict:
    keep = ("index", "knobs", "plan_hash", "results")
    return {key: entry[key] for key in keep if key in entry}


def recommendation(entries: list[dict], rules: pareto.Settings) -> dict:
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry["status"]] = counts.get(entry["status"], 0) + 1
    feasible = pareto.feasible(entries, rules)
    counts["meets_sla"] = len(feasible)
    best = pareto.best(entries, rules)
    return {
        "objective": rules.objective,
        "sla": {key: bound for key, bound in rules.bounds},
        "candidates": len(entries),
        "counts": counts,
        "best": _brief(best) if best else None,
        "pareto_front": [_brief(e) for e in pareto.front(entries, rules)],
        "rejected": [{"index": e["index"], "knobs": e["knobs"], "status": e["status"], "errors": e["errors"]}
                     for e in entries if e["status"] != "ok"],
        "sla_misses": [{"index": e["index"], "misses": pareto.misses(e, rules)} for e in entries
                       if e["status"] == "ok" and pareto.misses(e, rules)],
    }


def _knobs(knobs: dict) -> str:
    return ", ".join(f"{path.split('.')[-1]}={orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()}"
                     for path, value in knobs.items())


def table(result: dict, folder: str) -> str:
    """A few lines for people: counts, the best candidate, the front, the rejected with their first error."""
    key = pareto.OBJECTIVES[result["objective"]][0]
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result["counts"].items()))
    lines = [f"kvreplay recommendations ({result['candidates']} candidates: {counts})"]
    best = result["best"]
    if best:
        lines.append(f"best: #{best['index']} {_knobs(best['knobs'])}: {result['objective']} "
                     f"{best['results'][key]:,.2f}")
    else:
        lines.append("best: none meets the SLA")
    for entry in result["pareto_front"]:
        r = entry["results"]
        lines.append(f"front: #{entry['index']} {_knobs(entry['knobs'])}: {result['objective']} {r[key]:,.2f}, "
                     f"{r[pareto.USER_AXIS]:,.2f} tok/s/user")
    for entry in result["rejected"]:
        error = entry["errors"][0]
        lines.append(f"{entry['status']}: #{entry['index']} {_knobs(entry['knobs'])}: {error['code']}: "
                     f"{error['message']}")
    lines.append(f"Saved full result to: {folder}/recommendation.json")
    return "\n".join(lines) + "\n"
