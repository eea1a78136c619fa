"""Azure LLM inference traces (CSV `TIMESTAMP,ContextTokens,GeneratedTokens`): rows at their own times, reuse
only from the declared `shared_prefix_tokens`, and every bad row at its file:line:col.

The fixture holds the first six rows' shape of the public code trace (2023-11-16).  Its config declares a
1,024-token shared prefix in 64-token blocks: a longer prompt reuses all 16 blocks (1,024 tokens), the
1,024-token prompt 15 (its last token is computed), the 110-token one its one full block (64).
"""
from __future__ import annotations

import gzip

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file

from .support import ROOT, read_outputs

DATA = ROOT / "tests" / "data" / "azure"
CONFIG = DATA / "azure-trace.yaml"


def test_the_rows_arrive_at_their_times_and_share_only_the_declared_prefix(tmp_path):
    assert main(["predict", "-c", str(CONFIG), "--output-dir", str(tmp_path / "o"), "--capture-per-request",
                 "--no-progress"]) == 0
    summary, records = read_outputs(tmp_path / "o")
    records.sort(key=lambda r: r["arrival_time_ms"])
    assert [r["arrival_time_ms"] for r in records] == [0.0, 4314.579, 4471.869, 5154.122, 11195.801, 12059.669]
    assert [r["input_length"] for r in records] == [4808, 3180, 110, 7433, 2867, 1024]
    assert [r["first_admission_reused_input_tokens"] for r in records] == [0, 1024, 64, 1024, 1024, 960]
    assert summary["completed_requests"] == 6 and summary["total_input_tokens"] == 19422


def test_without_a_shared_prefix_nothing_is_reused(tmp_path):
    assert main(["predict", "-c", str(CONFIG), "--output-dir", str(tmp_path / "o"), "--no-progress",
                 "--set", "traffic.source.shared_prefix_tokens=0"]) == 0
    summary = orjson.loads((tmp_path / "o" / "prediction.json").read_bytes())
    assert summary["first_admission_prefix_cache_reused_ratio"] == 0.0


def test_a_gzipped_csv_reads_the_same(tmp_path):
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress((DATA / "azure-code-sample.csv").read_bytes(), mtime=0))
    (tmp_path / "c.yaml").write_text(CONFIG.read_text().replace("azure-code-sample.csv", "a.csv.gz"))
    packed, plain = compile_file(tmp_path / "c.yaml"), compile_file(CONFIG)
    assert list(packed.plan.records.traffic.source.rows) == list(plain.plan.records.traffic.source.rows)


@pytest.mark.parametrize("text, line, col, pointer, words", [
    ("TIMESTAMP,Context,Generated\n", 1, 1, "", "the header is"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,1\nyesterday,10,1\n", 3, 1, "/TIMESTAMP",
     "neither"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,1\n2023-11-16 18:15:47.1, 12x,1\n", 3, 24,
     "/ContextTokens", "integer"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,0\n", 2, 27, "/GeneratedTokens", "integer"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,1\n2023-11-16 18:15:45,10,1\n", 3, 1,
     "/TIMESTAMP", "must not decrease"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10\n", 2, 1, "", "2 fields"),
])
def test_a_bad_row_is_reported_at_its_field(tmp_path, text, line, col, pointer, words):
    (tmp_path / "bad.csv").write_text(text)
    (tmp_path / "c.yaml").write_text(CONFIG.read_text().replace("azure-code-sample.csv", "bad.csv"))
    diagnostic, = compile_file(tmp_path / "c.yaml").diagnostics
    assert diagnostic.code == "TRACE-ROW" and diagnostic.source.endswith("bad.csv")
    assert (diagnostic.span.line, diagnostic.span.col, diagnostic.pointer) == (line, col, pointer)
    assert words in diagnostic.message and diagnostic.named_by.pointer == "/traffic/source/paths/0"


def test_the_example_shares_its_declared_system_prompt(tmp_path):
    # examples/azure-trace.yaml: 12 rows, a 2,048-token shared prefix in 64-token blocks (32 blocks).  The first
    # request computes it, every later one reuses all 32 blocks, except the prompt that is only the prefix: its
    # last block holds the token it must compute, so it reuses 31 (1,984 tokens).
    config = ROOT / "examples" / "azure-trace.yaml"
    assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / "o"), "--capture-per-request",
                 "--no-progress"]) == 0
    summary, records = read_outputs(tmp_path / "o")
    records.sort(key=lambda r: r["arrival_time_ms"])
    lengths = [r["input_length"] for r in records]
    expected = [0] + [1984 if n == 2048 else 2048 for n in lengths[1:]]
    assert [r["first_admission_reused_input_tokens"] for r in records] == expected
    assert summary["completed_requests"] == 12
    assert summary["first_admission_prefix_cache_reused_ratio"] == pytest.approx((10 * 2048 + 1984) / sum(lengths))
    assert records[1]["arrival_time_ms"] == 717.0  # 18:17:03.931 - 18:17:03.214
