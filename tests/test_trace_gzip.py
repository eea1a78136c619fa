"""Gzip-compressed traces: a `.gz` Mooncake or AgentX (weka) trace reads as its unpacked file does, and a
damaged one is a TRACE-FILE diagnostic at the trace, never a traceback."""
from __future__ import annotations

import gzip

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file

from .support import EXAMPLES, output_bytes


def _config(tmp_path, example: str, trace: str, packed_name: str) -> str:
    text = (EXAMPLES / example).read_text().replace(trace, packed_name)
    path = tmp_path / f"{packed_name}.yaml"
    path.write_text(text)
    return str(path)


def test_a_gzipped_mooncake_trace_compiles_to_the_same_rows(tmp_path):
    trace = EXAMPLES / "traces" / "conversation-200.jsonl"
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(trace.read_bytes(), mtime=0))
    packed = compile_file(_config(tmp_path, "mooncake-trace.yaml", "traces/conversation-200.jsonl", "c.jsonl.gz"))
    plain = compile_file(EXAMPLES / "mooncake-trace.yaml")
    assert packed.ok and plain.ok
    rows = packed.plan.records.traffic.source.rows
    assert len(rows) == len(plain.plan.records.traffic.source.rows) == 200
    assert list(rows) == list(plain.plan.records.traffic.source.rows)


def test_a_gzipped_agentx_trace_replays_byte_identically(tmp_path):
    trace = EXAMPLES / "agentic" / "weka-g2-restore.jsonl"
    (tmp_path / "w.jsonl.gz").write_bytes(gzip.compress(trace.read_bytes(), mtime=0))
    config = _config(tmp_path, "agentic/agentx-g2-local.yaml", "weka-g2-restore.jsonl", "w.jsonl.gz")
    for name, path in (("packed", config), ("plain", str(EXAMPLES / "agentic" / "agentx-g2-local.yaml"))):
        assert main(["predict", "-c", path, "--output-dir", str(tmp_path / name), "--capture-per-request",
                     "--no-progress"]) == 0
    assert output_bytes(tmp_path / "packed") == output_bytes(tmp_path / "plain")


def test_a_damaged_gzip_trace_is_a_diagnostic(tmp_path):
    packed = gzip.compress((EXAMPLES / "traces" / "conversation-200.jsonl").read_bytes(), mtime=0)
    (tmp_path / "c.jsonl.gz").write_bytes(packed[: len(packed) // 2])  # cut in the middle
    (tmp_path / "w.jsonl.gz").write_bytes(b"not gzip at all")
    for example, trace, name in (("mooncake-trace.yaml", "traces/conversation-200.jsonl", "c.jsonl.gz"),
                                 ("agentic/agentx-g2-local.yaml", "weka-g2-restore.jsonl", "w.jsonl.gz")):
        result = compile_file(_config(tmp_path, example, trace, name))
        diagnostic, = result.diagnostics
        assert diagnostic.code == "TRACE-FILE" and diagnostic.source.endswith(name)
        assert "gzip" in diagnostic.message or "Not a gzipped file" in diagnostic.message
        assert diagnostic.span.line >= 1
