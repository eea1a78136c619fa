"""What the outputs see of a warmed agentic run: its measured requests only, their times from the warm-up barrier.

As AISimulate documents warm-up (docs/replay/agentic/warmup.md, "The barrier"): preparation requests (primers and
warm-up repeats) are outside latency, throughput, reuse and requests.jsonl, and the measured per-request
timestamps and the plays' outcome times start at the barrier (its absolute time is `profile_start_ms`).  The
replay itself keeps one absolute clock (the KV events, the timeline and `agentic_profile` read it), so the shift
is applied here, to each measured record as it is written, and to the play outcomes in agentic_report.py.
"""
from __future__ import annotations

# the absolute instants of a requests.jsonl record (durations such as ttft_ms do not move)
RECORD_TIMES = ("arrival_time_ms", "first_admit_ms", "first_token_ms", "last_token_ms", "terminal_time_ms",
                "prefill_admit_ms", "prefill_done_ms", "destination_reserved_ms", "destination_activated_ms",
                "decode_admit_ms", "source_held_ms", "source_released_ms")


def from_origin(value_ms: float | None, origin_ns: int) -> float | None:
    """An absolute time in ms as the same time counted from `origin_ns` (exact: the ms came from integer ns)."""
    return None if value_ms is None else (round(value_ms * 1e6) - origin_ns) / 1e6


def shifted(record: dict, origin_ns: int) -> dict:
    """A request record with its instants counted from `origin_ns`."""
    for key in RECORD_TIMES:
        if key in record:
            record[key] = from_origin(record[key], origin_ns)
    for admission in record.get("admission_history", ()):
        admission["at_ms"] = from_origin(admission["at_ms"], origin_ns)
    return record


class MeasuredLog:
    """The run's request log, told of measured requests only; their records count time from the barrier."""

    def __init__(self, log, traffic):
        self._log = log
        self._traffic = traffic
        spool = getattr(log, "spool", None)
        if spool is not None:  # (records are written as requests end: every measured one ends after the barrier)
            record_of = spool.record_of
            spool.record_of = lambda request: shifted(record_of(request), traffic.barrier_ns or 0)

    def arrived(self, request) -> None:
        if self._traffic.measured(request.spec):
            self._log.arrived(request)

    def ended(self, request, record: bool = True) -> None:
        if self._traffic.measured(request.spec):
            self._log.ended(request, record)

    def __getattr__(self, name):
        return getattr(self._log, name)
