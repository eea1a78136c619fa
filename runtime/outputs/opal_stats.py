"""opal's own per-stage statistics file, `stage_N/opal_stats.json`, with opal's keys, units and layout.

So that scripts written for opal read a kvreplay run: the keys in opal's
order, times in simulated seconds, per-request lists in completion order,
per-second series at each whole simulated second the stage was running, and
opal's compact layout (four-space indent, every list on one line, a nested
mapping one key per line, no final newline).  What differs is what opal gets
wrong (see spec/opal-reference.md): `kvc_tier_tokens` counts APC hits as
`apc`, not as `Cache Miss`, and failed requests are those that did not finish.
"""
from __future__ import annotations

import json
from itertools import repeat
from operator import mul

from .request_log import gap_columns

BINS = [1000 << k for k in range(14)]  # opal's latency histogram edges (compared with latencies in seconds)
S = 1e9


def compact(value: dict):
    """opal's layout of a statistics mapping, as pieces of text in order (a stage's decode values run to tens of
    megabytes: written piece by piece, the whole text never exists at once)."""
    yield "{\n"
    for number, (key, item) in enumerate(value.items()):
        yield (",\n" if number else "") + f"    {json.dumps(key)}: "
        if isinstance(item, dict):
            inner = ",\n".join(f"        {json.dumps(k)}: {_one_line(v)}" for k, v in item.items())
            yield f"{{\n{inner}\n    }}"
        elif isinstance(item, DecodeValues):
            yield "["
            for position, text in enumerate(item):
                yield f", {text}" if position else text
            yield "]"
        else:
            yield _one_line(item)
    yield "\n}"


class DecodeValues:
    """The stage's finished requests' decode values (`_decode_values`), each rendered as `compact` reaches it, so
    that the millions of numbers of a long run never all exist at once."""

    def __init__(self, finished: list):
        self.finished = finished

    def __iter__(self):
        return map(_decode_values, self.finished, repeat(GapTexts()))


class GapTexts(dict):
    """gap ns -> its value's text with the separator before it, made once per distinct gap: the requests decoding
    in one pass all get that pass's gap, so a stage's millions of gaps have few distinct values."""

    __slots__ = ()

    def __missing__(self, gap: int) -> str:
        text = self[gap] = ", " + _number(gap / S)
        return text


def _one_line(value) -> str:
    if isinstance(value, (list, tuple)):
        if all(type(item) in (int, float) for item in value):  # (a long list of numbers: json's own text of each)
            return "[" + ", ".join(map(_number, value)) + "]"
        return "[" + ", ".join(_one_line(item) for item in value) + "]"
    return json.dumps(value)


def _number(value) -> str:
    """json.dumps of a finite int or float, without its per-call overhead (the same text: Python's repr)."""
    return repr(value)


def _histogram(latencies: list[float]) -> list[float]:
    counts = [0.0] * len(BINS)
    for latency in latencies:
        index = next((i for i, edge in enumerate(BINS) if latency <= edge), len(BINS) - 1)
        counts[index] += 1.0
    return counts


def _decode_values(request, texts: GapTexts) -> str:
    """[TTFT, then every gap between tokens] in seconds, as `_one_line` writes that list (a run of equal gaps is
    one number's text repeated)."""
    gaps, counts = gap_columns(request.gaps)
    # (in C: a request's runs are thousands) each run's text with its separator, the string repeated `count`
    # times: a copy of bytes, not a join over every token's gap
    runs = map(mul, map(texts.__getitem__, gaps), counts)
    return "[" + _number((request.first_token_ns - request.arrival_ns) / S) + "".join(runs) + "]"


def per_second(requests: list, start_ns: int, end_ns: int, workers: list) -> tuple[list, list, list]:
    """(finished since the previous second, active workers, cumulative GPU busy %) at each whole simulated second
    from the stage's start to its end."""
    done = sorted(r.terminal_ns for r in requests if r.status == "completed")
    throughput, active, busy = [], [], []
    second = start_ns // 1_000_000_000 + 1
    position = 0
    ticks = range(second * 1_000_000_000, end_ns + 1, 1_000_000_000)
    busy_at = [_busy_until(w.busy_spans, ticks) for w in workers]
    for number, tick in enumerate(ticks):
        count = 0
        while position < len(done) and done[position] <= tick:
            position += 1
            count += 1
        throughput.append(count)
        active.append(sum(1 for w in workers if w.placeable(tick, False)))
        busy.append(sum(b[number] for b in busy_at) / len(workers) * 100 / tick if workers else 0.0)
    return throughput, active, busy


def _busy_until(spans: list, ticks: range) -> list[int]:
    """A worker's busy ns from 0 up to each tick (its spans are in time order and do not overlap)."""
    out, done, index = [], 0, 0
    for tick in ticks:
        while index < len(spans) and spans[index][1] <= tick:
            done += spans[index][1] - spans[index][0]
            index += 1
        partial = tick - spans[index][0] if index < len(spans) and spans[index][0] < tick else 0
        out.append(done + partial)
    return out


def stage_stats(requests: list, start_ns: int, end_ns: int, workers: list, tier_tokens: dict) -> dict:
    """opal_stats.json of one stage; `tier_tokens`: apc and each tier's served tokens, then `Cache Miss`."""
    finished = sorted((r for r in requests if r.status == "completed"), key=lambda r: (r.terminal_ns, r.spec.index))
    latency = [(r.last_token_ns - r.arrival_ns) / S for r in finished]
    throughput, active, busy = per_second(requests, start_ns, end_ns, workers)
    return {
        "bins": BINS,
        "total_latency": sum(latency),
        "raw_latency_values": latency,
        "raw_queuing_values": [(r.first_admit_ns - r.arrival_ns) / S for r in finished],
        "raw_kvc_io_time": [r.tier.io_ns / S for r in finished],
        "raw_kvc_hit_tokens": [r.first_reused_tokens or 0 for r in finished],
        "raw_gpu_time": [(r.last_token_ns - r.first_admit_ns) / S for r in finished],
        "raw_ttft_values": [(r.first_token_ns - r.arrival_ns) / S for r in finished],
        "raw_decode_values": DecodeValues(finished),
        "debug_val": [],
        "finished_requests": len(finished),
        "queued_requests": len(requests),
        "failed_requests": len(requests) - len(finished),
        "per_unit_throughput": throughput,
        "per_unit_workers": active,
        "per_unit_gpu_utilization": busy,
        "latencies": _histogram(latency),
        "stage_time_start": start_ns / S,
        "stage_time_end": end_ns / S,
        "input_output_tokens_sz": [[r.spec.prompt_len, r.generated] for r in finished],
        "kvc_tier_tokens": tier_tokens,
    }
