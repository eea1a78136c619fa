"""What `predict --explain-misses` adds to a run: the miss breakdown and the miss-ratio curve beside the run.

The summary gains `miss_classes` (tokens per class, miss_classes.py; they add
up to committed_prefill_tokens) and `miss_ratio_curve`: the ideal LRU curve
of the traffic's block stream in arrival order (mrc.py, sampled points
[capacity_blocks, hit_tokens, hit_ratio]), the replay's own point (its G1
blocks over all ranks, its first admissions' reused tokens), Belady's hit
tokens at that capacity, and the gap between the replay and the ideal LRU at
the replay's capacity by class (gap.py).  Each requests.jsonl record gains `miss_classes`
(null for a request never admitted); the policy/capacity split is only known
after the run, so the records are completed then, in the spool's file.
"""
from __future__ import annotations

from dataclasses import replace

import orjson

from ..outputs.request_log import RequestLog
from . import belady_bound, block_stream, gap, mrc
from .miss_classes import MissExplainer


class ExplainedLog(RequestLog):
    """A RequestLog that also keeps each arriving request's index, prompt and keys (the curve's stream)."""

    def __init__(self, keep: bool, spool, arrivals: list, misses: MissExplainer):
        super().__init__(keep=keep, spool=spool)
        self.arrivals = arrivals
        self.misses = misses

    def arrived(self, request) -> None:
        super().arrived(request)
        self.misses.keys_of(request)  # (an array, not the spec: the spec's memoised key list would stay alive)
        self.arrivals.append((request.spec.index, request.spec.prompt_len))


class Explanation:
    def __init__(self, replay):
        self.misses = MissExplainer(replay.ranks())
        self.arrivals: list = []  # (request index, prompt tokens) in arrival order

    def log(self, keep: bool, spool) -> ExplainedLog:
        return ExplainedLog(keep, spool, self.arrivals, self.misses)

    def sections(self, replay, summary: dict) -> dict:
        """The summary's two sections, once the replay has ended."""
        self.misses.finish()
        size = replay.block_size
        indices = [index for index, _ in self.arrivals]
        limits = [max(0, (prompt - 1) // size) for _, prompt in self.arrivals]
        stream = block_stream.from_key_arrays([self.misses.key_arrays[i] for i in indices], limits, size)
        stream = replace(stream, prompt_tokens=sum(prompt for _, prompt in self.arrivals))
        self.misses.key_arrays.clear()
        found = mrc.thresholds(stream)
        curve = mrc.curve_of(stream, found)
        capacity = sum(rank.pool.capacity for rank in replay.ranks())
        section = curve.summary(extra=[capacity] if capacity <= curve.saturation else [])
        section["replay"] = {"capacity_blocks": capacity,
                             "hit_tokens": summary["first_admission_g1_reused_tokens"] +
                             summary["first_admission_host_reused_tokens"]}
        section["gap"] = gap.attribute(stream, found, capacity, indices, self.misses.first_codes)
        del found
        belady = belady_bound.prefix_hits(stream, min(capacity, curve.saturation))
        section["belady"] = [[capacity, int(belady.sum()) * size]]
        return {"miss_classes": self.misses.totals(), "miss_ratio_curve": section}

    def complete_records(self, path) -> None:
        """Add each record's `miss_classes` to the requests.jsonl written at `path` (canonical lines again)."""
        lines = []
        with open(path, "rb") as f:
            for number, line in enumerate(f):  # (records are in request index order)
                record = orjson.loads(line)
                record["miss_classes"] = self.misses.of(record.get("index", number))
                lines.append(orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n")
        with open(path, "wb") as f:
            f.writelines(lines)
