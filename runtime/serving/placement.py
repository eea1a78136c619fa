"""The router: which rank takes an arriving request, and which peer a KVCR hint names.

Placement chooses among the role's workers that are part of it now (ready
ones first, see scaling.py) by the router's policy: round robin (predict's
`round_robin` and `kv_aware`), or opal's `least_loaded`, `random` and
`max_prefix` (routing.py).  Round robin then goes over each worker's DP ranks
in turn; the other policies go over the chosen worker's ranks in the order of
its own placements.  A ReplaySpec request may pin its worker (`worker_idx`, if
that worker is part of the role now) and its DP rank within the worker
(`dp_rank`).

Hints: a ReplaySpec request's `kv_hints` (the one with most cached tokens
first), or with `placement: kv_aware` the peer whose G2 holds the longest
prefix of the prompt (ties: the lowest rank).  A hint naming the receiving
rank, another role, or a worker that is gone (left and drained) is ignored.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import routing

ALWAYS = [(0, 0, None)]  # a worker's periods when it is part of its role from the start to the end (worker.py)


@dataclass
class Router:
    workers: list
    policy: str = "round_robin"  # or "kv_aware"; opal: "least_loaded" | "random" | "max_prefix" (routing.py)
    seed: int = 0  # the random and max_prefix draws (opal's simulation.seed)
    placed: dict = field(default_factory=dict)  # role -> requests placed by the policy so far
    turns: dict = field(default_factory=dict)  # worker index -> requests placed on it (its DP rank in turn)
    roles: dict = field(default_factory=dict, repr=False)  # role -> its workers (`members`: roles are set at build)

    def __post_init__(self):
        if self.policy not in ("kv_aware",) + routing.POLICIES:
            raise ValueError(f"unknown placement policy {self.policy!r}")

    @property
    def reads_state(self) -> bool:
        """Does a placement read the workers' queues or caches (so the state at an arrival must be exact)?"""
        return self.policy in routing.READS_STATE

    def members(self, role: str) -> list:
        """The role's workers, in index order (one list per role, made once: do not change it)."""
        found = self.roles.get(role)
        if found is None:
            found = self.roles[role] = [w for w in self.workers if w.ranks[0].role == role]
        return found

    def place(self, role: str, now: int, rank: int | None = None, worker: int | None = None, spec=None):
        """The rank that takes a request (`spec`, read by max_prefix) arriving at `now`."""
        members = self.members(role)
        if worker is not None and worker < len(members) and members[worker].placeable(now, False):
            chosen, turn = members[worker], 0
        else:
            # (one worker, never scaled: it takes every request; the lists below would name it alone)
            workers = members if len(members) == 1 and members[0].periods == ALWAYS else \
                [w for w in members if w.placeable(now, True)] or \
                [w for w in members if w.placeable(now, False)] or members
            count = self.placed.get(role, 0)
            self.placed[role] = count + 1
            if self.policy in ("round_robin", "kv_aware"):
                chosen, turn = workers[count % len(workers)], count // len(workers)
            else:
                chosen = routing.choose(self.policy, workers, count, self.seed, spec)
                turn = self.turns.get(chosen.index, 0)
                self.turns[chosen.index] = turn + 1
        return chosen.ranks[(rank if rank is not None else turn) % len(chosen.ranks)]

    def hint(self, rank, spec, keys: list, now: int, pulls_in_flight: dict):
        """The rank a request (`spec`, its block `keys` on `rank`), placed on `rank`, may pull its prefix from
        (None: no hint)."""
        peers = [peer for worker in self.members(rank.role) if self._exists(worker, now, pulls_in_flight)
                 for peer in worker.ranks if peer is not rank]
        if spec.kv_hints:
            for rank_index, worker_index, _ in sorted(spec.kv_hints, key=lambda h: -h[2]):
                source = self._named(rank.role, rank_index, worker_index)
                if source in peers:
                    return source
            return None
        if self.policy != "kv_aware":
            return None
        keys = keys[:(spec.prompt_len - 1) // rank.block_size]
        best, most = None, 0
        for peer in peers:
            held = peer.chain.peer_prefix(keys)
            if held > most:
                best, most = peer, held
        return best

    def _named(self, role: str, rank_index: int, worker_index: int | None):
        """A hint's rank: the `rank_index`-th DP rank of the role, or of its `worker_index`-th worker."""
        workers = self.members(role)
        if worker_index is not None:
            ranks = workers[worker_index].ranks if worker_index < len(workers) else []
        else:
            ranks = [r for w in workers for r in w.ranks]
        return ranks[rank_index] if rank_index < len(ranks) else None

    @staticmethod
    def _exists(worker, now: int, pulls_in_flight: dict) -> bool:
        """Part of its role now, or still draining (work or pulls left)."""
        return worker.placeable(now, False) or any(r.busy for r in worker.ranks) or \
            pulls_in_flight.get(worker.index, 0) > 0
