"""Placement policies: which of a role's candidate workers takes an arriving request.

The router (placement.py) hands each policy the candidates (the workers that
are part of the role now, ready ones first, exactly as round robin uses them)
and the role's placement count so far; a policy returns one candidate.

- `round_robin`: the candidates in turn (the count modulo their number).
- `least_loaded`: the fewest outstanding requests (`outstanding`: waiting and
  running on the worker's ranks, however far each has got); ties: the lowest
  index.
- `random`: a seeded uniform choice, a pure function of (seed, ROUTER_STREAM,
  placement count): the same on every platform and in every run.
- `max_prefix`: the most tokens of the prompt the worker's cache holds
  (`held_prefix`); ties (also "nobody holds any") go by the same seeded choice
  among the tied workers.

A worker with several DP ranks scores as its best rank; the rank that takes
the request is chosen by the router (opal workers have one rank).
"""
from __future__ import annotations

from ..traffic.rng import bits

ROUTER_STREAM = 0x524F55544552  # "ROUTER": the router's own stream of draws, apart from the traffic's
POLICIES = ("round_robin", "least_loaded", "random", "max_prefix")
READS_STATE = ("least_loaded", "max_prefix")  # policies that read the workers' queues or caches at an arrival


def outstanding(worker) -> int:
    """Requests placed on the worker and not finished: waiting (also preempted ones) or running."""
    return sum(len(rank.waiting) + len(rank.running) for rank in worker.ranks)


def held_prefix(rank, spec) -> int:
    """Tokens of `spec`'s prompt the rank could reuse now: its G1 prefix (whole blocks, at most
    (prompt_len - 1) // block_size of them, as an admission caps it) and what its tiers hold beyond that."""
    size = rank.block_size
    limit = (spec.prompt_len - 1) // size
    g1_tokens = rank.pool.held_tokens(spec, size, limit)
    return g1_tokens + rank.chain.held_beyond(rank, spec, g1_tokens)


def seeded_choice(candidates: list, seed: int, counter: int):
    """One of `candidates`, drawn from the router's stream at `counter`."""
    return candidates[bits(seed, ROUTER_STREAM, counter) % len(candidates)]


def choose(policy: str, candidates: list, count: int, seed: int, spec=None):
    """The candidate worker that takes the `count`-th placement of the role (`spec`: the request)."""
    if policy == "least_loaded":
        loads = [outstanding(worker) for worker in candidates]
        return candidates[loads.index(min(loads))]
    if policy == "random":
        return seeded_choice(candidates, seed, count)
    if policy == "max_prefix":
        held = [max(held_prefix(rank, spec) for rank in worker.ranks) for worker in candidates]
        most = max(held)
        tied = [worker for worker, tokens in zip(candidates, held) if tokens == most]
        return tied[0] if len(tied) == 1 else seeded_choice(tied, seed, count)
    return candidates[count % len(candidates)]  # round_robin (and the predict placements)
