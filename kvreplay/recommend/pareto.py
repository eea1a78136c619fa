"""Ranking a sweep: SLA targets, the objective, the best candidate and the Pareto front.

SLA targets bound latency percentiles of the prediction summary (`recommend.sla: {ttft_ms: {p90: 500},
tpot_ms: {median: 40}, e2e_ms: {p99: 3000}}`); a candidate meets the SLA when every bound holds. The
objective (default `throughput_per_gpu`, output tokens per second per GPU, as AISimulate's) picks the
best among the candidates that meet it; a tie goes to more tokens per second per user, then the lower
index. The front is the candidates meeting the SLA that no other beats on both the objective and the
tokens per second each user sees.
"""
from __future__ import annotations

from dataclasses import dataclass

SLA_METRICS = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "itl_ms", "e2e_ms": "e2e_latency_ms"}
SLA_STATS = ("mean", "median", "p90", "p95", "p99", "max")
# objective -> (result key, +1 to maximize / -1 to minimize)
OBJECTIVES = {"throughput_per_gpu": ("throughput_per_gpu", 1), "throughput": ("output_throughput_tok_s", 1),
              "request_throughput": ("request_throughput_rps", 1), "min_gpus": ("gpus", -1),
              "min_ttft": ("p90_ttft_ms", -1), "min_e2e": ("p90_e2e_latency_ms", -1)}
USER_AXIS = "tokens_per_second_per_user"


class SettingsError(ValueError):
    """`recommend.sla` or `recommend.objective` cannot be read."""


@dataclass(frozen=True)
class Settings:
    bounds: tuple[tuple[str, float], ...]  # (result key, upper bound), sorted
    objective: str

    @property
    def key(self) -> str:
        return OBJECTIVES[self.objective][0]

    @property
    def sign(self) -> int:
        return OBJECTIVES[self.objective][1]


def settings(block: dict) -> Settings:
    """The SLA bounds and objective of a `recommend` block."""
    objective = block.get("objective", "throughput_per_gpu")
    if objective not in OBJECTIVES:
        raise SettingsError(f"recommend.objective: {objective!r} is not one of {', '.join(OBJECTIVES)}")
    bounds = []
    for metric, stats in sorted((block.get("sla") or {}).items()):
        if metric not in SLA_METRICS or not isinstance(stats, dict):
            raise SettingsError(f"recommend.sla.{metric}: write one of {', '.join(SLA_METRICS)} as "
                                "{STAT: BOUND}, e.g. ttft_ms: {p90: 500}")
        for stat, bound in sorted(stats.items()):
            if stat not in SLA_STATS or isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound <= 0:
                raise SettingsError(f"recommend.sla.{metric}.{stat}: a statistic ({', '.join(SLA_STATS)}) with "
                                    "a positive bound in milliseconds")
            bounds.append((f"{stat}_{SLA_METRICS[metric]}", float(bound)))
    return Settings(tuple(bounds), objective)


def misses(entry: dict, rules: Settings) -> list[str]:
    """The SLA bounds an ok candidate misses, as `p90_ttft_ms 612.5 > 500`."""
    results = entry.get("results") or {}
    return [f"{key} {results.get(key, float('inf')):g} > {bound:g}" for key, bound in rules.bounds
            if results.get(key, float("inf")) > bound]


def feasible(entries: list[dict], rules: Settings) -> list[dict]:
    return [e for e in entries if e["status"] == "ok" and not misses(e, rules)]


def best(entries: list[dict], rules: Settings) -> dict | None:
    pool = feasible(entries, rules)
    if not pool:
        return None
    # (a tie on the objective goes to the faster per-user candidate, so the best is always on the front)
    return min(pool, key=lambda e: (-rules.sign * e["results"][rules.key], -e["results"][USER_AXIS], e["index"]))


def front(entries: list[dict], rules: Settings) -> list[dict]:
    """The Pareto front over (objective, tokens per second per user), by candidate index."""
    pool = feasible(entries, rules)
    points = [(rules.sign * e["results"][rules.key], e["results"][USER_AXIS]) for e in pool]

    def dominated(i: int) -> bool:
        a = points[i]
        return any(b[0] >= a[0] and b[1] >= a[1] and b != a for j, b in enumerate(points) if j != i)

    return [entry for i, entry in enumerate(pool) if not dominated(i)]
