"""The names opal configs use: KVC tiers, stage types, routing policies (case-insensitive) and their plan names."""
from __future__ import annotations

TIERS = ("CPUMemory", "LocalNVMe", "DistributedFS")
SHARED_TIERS = ("DistributedFS",)  # one store for every worker; the others belong to each worker
STAGE_TYPES = ("UniformReqRate", "ExponentialReqRate", "trace", "otel")
RATE_STAGES = {"UniformReqRate": "uniform", "ExponentialReqRate": "exponential"}
POLICIES = ("RoundRobin", "LeastLoaded", "Random", "MaxPrefix")
_PLAN_POLICIES = {"roundrobin": "round_robin", "leastloaded": "least_loaded", "random": "random",
                  "maxprefix": "max_prefix"}


def policy_name(written) -> str | None:
    """RoundRobin, round_robin, ROUNDROBIN -> round_robin; None for an unknown policy."""
    return _PLAN_POLICIES.get(str(written).replace("_", "").replace("-", "").lower())
