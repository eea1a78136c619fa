"""Issue 20, item 2: memory follows the requests in flight, not the trace; outputs are written as requests end.

A replay whose log keeps no requests frees each one when it ends; open-loop arrivals are made one at a time;
requests.jsonl is written in index order while requests end out of order; a trace is held in columns.
"""
from __future__ import annotations

import tracemalloc
from array import array

import orjson
import pytest

from kvreplay.compiler.diagnostics import CompileError
from kvreplay.compiler.passes import traces
from kvreplay.compiler.trace_table import TraceTable
from kvreplay.runtime.build import build
from kvreplay.runtime.outputs import metrics
from kvreplay.runtime.outputs.record_spool import RecordSpool, encode_lines
from kvreplay.runtime.outputs.request_log import RequestLog

from .support import compile_yaml

CONFIG = """engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 20.0, decode_ms: 5.0}}
      kv_cache: {{block_size: 16, capacity: {{type: fixed, blocks: 4000}}}}
traffic:
  source: {{type: synthetic, input_tokens: 4096, output_tokens: 8}}
  load: {{type: constant_rate, requests_per_second: 10.0}}
  stop: {{requests: {requests}}}
"""


def replay_peak(requests: int, keep: bool) -> tuple[int, dict]:
    """(peak traced bytes, summary) of a replay of `requests` open-loop requests whose log keeps them or not."""
    plan = compile_yaml(CONFIG.format(requests=requests)).plan.records
    replay = build(plan)
    replay.log = RequestLog(keep=keep)
    tracemalloc.start()
    try:
        replay.run()
        end = replay.close()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, metrics.summary(replay.log, end)


def test_memory_follows_the_requests_in_flight_not_the_traffic():
    small, small_summary = replay_peak(150, keep=False)
    large, large_summary = replay_peak(600, keep=False)
    assert small_summary["completed_requests"] == 150 and large_summary["completed_requests"] == 600
    assert large < 1.3 * small, (small, large)  # 4x the requests, about the same memory
    kept, kept_summary = replay_peak(600, keep=True)
    assert kept_summary == large_summary  # keeping them changes no number ...
    assert kept > 2 * large  # ... but each kept request holds its 256 block keys


def test_the_summary_from_aggregates_is_the_summary_of_the_requests():
    """The log's aggregates give what the requests themselves give (latency samples merged by value)."""
    peak, summary = replay_peak(40, keep=True)
    assert summary["num_requests"] == 40 and summary["num_itl_samples"] == 40 * 7
    assert summary["mean_ttft_ms"] == pytest.approx(20.0) and summary["min_itl_ms"] == 5.0


class Ended:
    def __init__(self, index: int, value: str):
        self.spec = type("Spec", (), {"index": index})()
        self.value = value


def test_the_spool_writes_records_in_index_order_as_requests_end(tmp_path):
    partial = tmp_path / ".requests.jsonl.partial"
    spool = RecordSpool(partial, lambda request: {"index": request.spec.index, "v": request.value})
    for index in (1, 0, 3, 2, 6, 5):  # 4 never ends (it never arrived): 5 and 6 wait until the end
        spool.add(Ended(index, f"r{index}"))
        if index == 0:
            assert partial.read_bytes() == b""  # (buffered by the file, not yet flushed)
    assert spool.waiting.keys() == {5, 6} and spool.next_index == 4
    path = spool.finish()
    assert [orjson.loads(line)["index"] for line in path.read_bytes().splitlines()] == [0, 1, 2, 3, 5, 6]


def test_a_spool_that_is_discarded_leaves_no_file(tmp_path):
    spool = RecordSpool(tmp_path / ".requests.jsonl.partial", lambda request: {"index": request.spec.index})
    spool.add(Ended(0, ""))
    spool.discard()
    assert list(tmp_path.iterdir()) == []


def test_a_trace_table_gives_the_rows_it_was_given():
    table = TraceTable()
    table.append(0, 600, 3, [0, 1], None)
    table.append(5, 512, 1, [0, 2 ** 40], "s")  # an id of 2^32 or more widens the id column
    assert table.ids.typecode == "Q" and list(table.ids) == [0, 1, 0, 2 ** 40]
    assert len(table) == 2 and table[1] == (5, 512, 1, (0, 2 ** 40), "s") and table[0].session_id is None
    assert [row.hash_ids for row in table] == [(0, 1), (0, 2 ** 40)]
    assert table.token_totals(2) == (600 + 512, 3 + 1) and table.token_totals(1) == (600, 3)
    with pytest.raises(IndexError):
        table[2]
    assert isinstance(TraceTable().ids, array) and TraceTable().ids.typecode == "I"


def test_a_trace_line_longer_than_the_limit_is_refused_at_its_line(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n' + b"0" * 300)
    monkeypatch.setattr(traces, "MAX_LINE_BYTES", 200)
    with pytest.raises(CompileError) as error:
        traces.read_trace(path, 512)
    [problem] = error.value.diagnostics
    assert problem.code == "TRACE-ROW" and problem.span.line == 2 and "longer than 200 bytes" in problem.message


def test_a_trace_larger_than_the_limit_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n' * 10)
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 500)
    with pytest.raises(CompileError) as error:
        traces.read_trace(path, 512)
    assert [d.code for d in error.value.diagnostics] == ["TRACE-FILE"]
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 5000)
    assert len(traces.read_trace(path, 512)) == 10


def test_a_trace_rows_spec_is_the_one_the_constructor_makes():
    import pickle
    from dataclasses import fields, replace

    from kvreplay.runtime.serving.requests import Content, RequestSpec

    made = RequestSpec.of_trace_row(7, 800, 3, (0, 5), 512, 2_000_000, "s")
    built = RequestSpec(7, 800, 3, Content(hash_ids=(0, 5), trace_block=512), arrival_ns=2_000_000, session_id="s")
    assert made == built and hash(made) == hash(built)
    # every field reads the same (the ones a row does not set from the class's defaults), pickled or not
    for spec in (made, pickle.loads(pickle.dumps(made))):
        for one, other in ((spec, built), (spec.content, built.content)):
            assert {f.name: getattr(one, f.name) for f in fields(one)} == \
                {f.name: getattr(other, f.name) for f in fields(other)}
    assert made.turn_index is None and made.kv_hints == () and made.content.segments == ()
    # its memo is its own, and keys follow the rule: 800 prompt tokens fill 3 blocks of 256, ids 0 and 5 of
    # 512-token blocks hold them: keys 2h + j (0, 1, then 10); 803 tokens fill no fourth (no output key)
    assert made.keys(256) == [0, 1, 10] and made._keys is not built._keys and built._keys == {}
    assert replace(made, arrival_ns=3) == replace(built, arrival_ns=3)


def test_the_fast_row_check_never_passes_a_row_the_full_check_refuses():
    good = {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}
    variants = [good, {**good, "timestamp": 2.5}, {**good, "timestamp": True}, {**good, "timestamp": -1},
                {**good, "timestamp": float("nan")}, {**good, "input_length": 0}, {**good, "input_length": 2 ** 31},
                {**good, "output_length": 1.0}, {**good, "hash_ids": [0]}, {**good, "hash_ids": [0, -1]},
                {**good, "hash_ids": [0, True]}, {**good, "hash_ids": (0, 1)}, {"timestamp": 0}, [good], None]
    verdicts = [(traces._plainly_valid(row, 512), traces.check_row(row, 512) is None) for row in variants]
    # the fast check passes exactly the first two (plain ints, or a float timestamp); the full check agrees on those
    # and refuses every other variant here
    assert verdicts == [(True, True), (True, True)] + [(False, False)] * (len(variants) - 2)


def test_records_encoded_a_chunk_at_a_time_are_the_lines_of_each_record():
    """encode_lines gives each record's own sorted-key line, whether it splits one encoding of the chunk or not."""
    records = [{"b": 1.5, "a": i, "h": [{"a": 1, "z": None}, {"a": 2}], "s": '},{"a":'} for i in range(5)]
    lines = b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in records)
    assert encode_lines(records) == lines and encode_lines(records[:1]) == lines.split(b"\n")[0] + b"\n"
    # a record whose first key differs, and a nested list of dicts beginning with the first key: each alone
    mixed = records + [{"0": 0, "a": 9}]
    assert encode_lines(mixed) == lines + b'{"0":0,"a":9}\n'
    nested = [{"a": 0, "h": [{"a": 1}, {"a": 2}]}, {"a": 3}]
    assert encode_lines(nested) == b'{"a":0,"h":[{"a":1},{"a":2}]}\n{"a":3}\n'
    assert encode_lines([]) == b"" and encode_lines([{}, {}]) == b"{}\n{}\n"
    # a vouched first key is not checked per record, and gives the same lines
    assert encode_lines(records, "a") == lines and encode_lines(nested, "a") == encode_lines(nested)


def test_every_record_s_least_key_is_the_one_the_spool_is_told():
    """request_record vouches for its least key (RecordSpool's first_key): every record of a replay has it, and
    the records are built in the encoder's sorted order."""
    plan = compile_yaml(CONFIG.format(requests=20)).plan.records
    replay = build(plan)
    replay.run()
    records = [metrics.request_record(request) for request in replay.requests]
    assert len(records) == 20 and all(min(record) == metrics.FIRST_KEY for record in records)
    assert all(list(record) == sorted(record) for record in records)
