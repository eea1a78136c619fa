"""The replay's account of its requests: told of each one when it ends, it keeps what the outputs need of it.

What the summary reports is kept as exact aggregates (integer sums and counts,
and each latency's sample as value -> count), so memory grows with the
distinct latency values, not with the requests or their tokens.  With a
`RecordSpool`, each request's requests.jsonl record is written as the request
ends.  Only a log that `keep`s them (tests, opal's per-stage outputs, the
ReplaySpec lowering) holds on to the requests themselves; otherwise a request
the replay has finished with is freed, keys and all.
"""
from __future__ import annotations

from array import array
from collections import _count_elements
from itertools import compress
from operator import itemgetter

from .record_spool import RecordSpool

MS = 1e6
LATENCIES = ("ttft", "ttst", "tpot", "itl", "e2e_latency")


class LatencySamples:
    """Each latency's sample over completed requests: TTFT, TTST and E2E per request, TPOT per request of more
    than one output token, ITL every gap between consecutive tokens (all integer ns but TPOT, a ratio)."""

    def __init__(self):
        self.counts: dict[str, dict] = {name: {} for name in LATENCIES}
        self.samples = tuple(self.counts.values())  # (the same dicts in LATENCIES order, for `add`)

    def add(self, request) -> None:
        ttft, ttst, tpot, itl, e2e = self.samples
        arrival, first, last = request.arrival_ns, request.first_token_ns, request.last_token_ns
        value = first - arrival
        ttft[value] = ttft.get(value, 0) + 1
        second = request.second_token_ns
        if second is not None:
            value = second - first
            ttst[value] = ttst.get(value, 0) + 1
        generated = request.generated
        if generated > 1:
            value = (last - first) / MS / (generated - 1)
            tpot[value] = tpot.get(value, 0) + 1
        add_runs(itl, request.gaps)
        value = last - arrival
        e2e[value] = e2e.get(value, 0) + 1

    def runs(self) -> dict[str, list[tuple[float, int]]]:
        """Each sample in ms as (value, count) runs, in the summary's order."""
        return {name: list(counts.items()) if name == "tpot" else [(ns / MS, n) for ns, n in counts.items()]
                for name, counts in self.counts.items()}


def add_runs(counts: dict, gaps) -> None:
    """Each (gap, count) run of `gaps` (`gap_runs`' forms) into `counts`, gap -> total count."""
    if type(gaps) is list and len(gaps) < FEW_RUNS:  # (a trace request's few runs: a loop costs a third of the
        get = counts.get  # columns' making; the same keys inserted in the same order)
        for gap, count in gaps:
            counts[gap] = get(gap, 0) + count
        return
    values, repeats = gap_columns(gaps)
    # one per run counted in C (a run is mostly one gap: pass times differ), then the rest of the longer runs:
    # the same keys inserted in the same order as a loop adding each run's count
    _count_elements(counts, values)
    if repeats.count(1) != len(repeats):
        for gap, count in compress(zip(values, repeats), map(ONE.__ne__, repeats)):
            counts[gap] += count - 1


FIRST, SECOND, ONE = itemgetter(0), itemgetter(1), 1
# below this many runs the plain loop is faster (0.3 against 1.2 us at 4 runs; the columns win from about 50 runs
# of one gap each, opal's requests: 31 against 48 us at 300)
FEW_RUNS = 32


def gap_columns(gaps) -> tuple:
    """(gaps, counts) of a request's `gaps` runs, packed or not, as two columns."""
    if type(gaps) is list:
        return list(map(FIRST, gaps)), list(map(SECOND, gaps))
    return gaps[::2], gaps[1::2]


def gap_runs(gaps) -> zip | list:
    """(gap, count) runs of a request's `gaps`, packed (`Request.pack_gaps`) or not."""
    return zip(gaps[::2], gaps[1::2]) if isinstance(gaps, array) else gaps


class RequestLog:
    """Aggregates over every request told (`ended`), its records on a spool if any, and the requests if `keep`
    (with `pack_gaps`, a kept request's gaps are packed once it ended, before its ITL gaps are counted)."""

    pack_gaps = False

    def __init__(self, keep: bool = True, spool: RecordSpool | None = None):
        self.requests: list | None = [] if keep else None  # (arrival order, as the replay made them)
        self.spool = spool
        self.total = self.completed = 0
        self.statuses: dict[str, int] = {}
        self.first_rejected = None  # (why nothing completed, when nothing did)
        self.start_ns: int | None = None
        self.input_tokens = self.output_tokens = self.committed = self.reused = 0
        self.first_reused = self.first_host = self.preemptions = 0
        self.last_end_ns: int | None = None  # the last completion (a cut-off run's duration ends there)
        self.latencies = LatencySamples()

    def arrived(self, request) -> None:
        if self.requests is not None:
            self.requests.append(request)

    def ended(self, request, record: bool = True) -> None:
        """`request` reached its terminal status (completed, rejected, incomplete): count it, write its record
        (`record` False: a request still in flight when a time limit cut the run has none, as in AISimulate)."""
        self.total += 1
        status = request.status
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status == "rejected" and self.first_rejected is None:
            self.first_rejected = request
        arrival = request.arrival_ns
        if self.start_ns is None or arrival < self.start_ns:
            self.start_ns = arrival
        admissions = len(request.admissions)
        if admissions:
            if status != "incomplete" and status != "canceled":  # (the token totals and reuse ratios are over
                # requests that ended by themselves, as AISimulate's: a cancelled one is in neither)
                self.input_tokens += request.spec.prompt_len
                self.output_tokens += request.generated
                self.reused += request.reused_tokens  # (its largest reuse over its prefill admissions)
                self.first_reused += request.first_reused_tokens or 0
                self.first_host += request.first_host_tokens or 0
            self.committed += request.committed_prefill
            self.preemptions += admissions - 1
        if self.pack_gaps and self.requests is not None:  # (first: the ITL sample then reads two slices of one
            request.pack_gaps()  # flat array, not every run's list scattered over the heap, twice)
        if status == "completed":
            self.completed += 1
            if self.last_end_ns is None or request.terminal_ns > self.last_end_ns:
                self.last_end_ns = request.terminal_ns
            self.latencies.add(request)
        if self.spool is not None and record:
            self.spool.add(request)
