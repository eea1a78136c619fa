"""The interface every backend's engine gives the replay shell, and vLLM's engine, the default.

An engine is what differs between vLLM, TensorRT-LLM and SGLang: how a rank
schedules a pass (which requests run, which wait, which are preempted), what
the end of a pass does to the cache (what becomes reusable, what is freed),
which G1 cache a rank keeps, and whether pure decode passes may be fused into
a macro step.  Everything else (tiers, copies, handoffs, placement, timing,
outputs) is shared and knows nothing of the backend.  The shell calls
`schedule` and `finish` on a worker's engine; building a rank calls `equip`,
which gives it the engine's admission policy (table.py picks the engine).
"""
from __future__ import annotations

from ..serving import pass_results, scheduler
from ..tiers.g1 import RestoredOnlyPool
from ..tiers.g1_runs import RunPool


class Engine:
    """vLLM v1: continuous batching with recompute preemption (serving/scheduler.py), blocks freed at the end
    of the pass that finishes a request, the newest running request preempted when blocks run out."""

    name = "vllm"
    fusable = True  # pure decode passes may be applied at once (shell/macro.py)
    keyed = True  # its requests carry block keys (spec.keys): vLLM's and TensorRT-LLM's caches match by them

    @property
    def rejects_when_reached(self) -> bool:
        """Does a prompt too big for G1 wait in the queue until admission reaches it, as in AISimulate's mocker?
        Only where passes are scheduled by serving/scheduler.py, which does the rejecting (else: on arrival)."""
        return type(self).schedule is Engine.schedule

    def schedule(self, rank, now_ns: int):
        return scheduler.schedule(rank, now_ns)

    def finish(self, rank, batch, end_ns: int) -> list:
        return pass_results.finish_pass(rank, batch, end_ns)

    def cancel(self, rank, requests: list) -> None:
        """The traffic cancels `requests`, open on `rank` (pass_results.cancel: vLLM's rule, TensorRT-LLM's too)."""
        for request in requests:
            pass_results.cancel(rank, request)

    def plan_fused(self, worker, batches, now, horizon, stop, can_finish):
        """A run of pure decode passes to apply at once (shell/macro.py), or None."""
        return _macro().plan(worker, batches, now, horizon, stop, can_finish)

    def apply_fused(self, fused) -> list:
        """Apply `plan_fused`'s run; (request, end time) of every request it finished."""
        return _macro().apply(fused)

    def g1(self, blocks: int, prefix_caching: bool):
        return RunPool(blocks, prefix_caching)

    def sequence_limit(self, rank) -> int | None:
        """Tokens a request's prompt plus output may reach on `rank`, its output cut there (None: vLLM has
        no limit of its own: a sequence that outgrows G1 is rejected, never_fits.py)."""
        return None

    def equip(self, rank, role=None) -> None:
        """Give a built rank what this engine decides for it (vLLM: the scheduler's own defaults, and a G1 that keeps
        every computed copy of a key, as the mocker's one vLLM pool does for every rank; facts §54).  opal's pools
        without APC serve restored blocks only (and with APC are replaced by tiers.apc's): they keep none."""
        if not isinstance(rank.pool, RestoredOnlyPool):
            rank.pool.keep_copies()


def _macro():
    """shell/macro.py, imported at first use (the shell sits above the engines) and kept: a `from package import`
    at each pass ran importlib's Python-level fromlist check, about 1 % of a request's instructions (facts §74)."""
    global _MACRO
    if _MACRO is None:
        from ..shell import macro
        _MACRO = macro
    return _MACRO


_MACRO = None
VLLM = Engine()

