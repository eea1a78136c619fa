"""Test helpers that several test modules share: repository paths, config text, reading a run's outputs.
(Hand-built trace scenarios are in tests/scenarios.py.)"""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kvreplay.compiler.pipeline import compile_bytes

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED_TRACES = ROOT.parent / "shared" / "traces"  # the real Mooncake traces live beside the checkout, not in it
TRAFFIC = "traffic: {source: {type: synthetic}, load: {type: concurrency, concurrency: 2}, stop: {requests: 4}}\n"


def compile_yaml(text: str, overrides=()):
    return compile_bytes(text.encode(), "test.yaml", overrides)


def codes(result) -> set[str]:
    return {d.code for d in result.diagnostics}


def read_outputs(out_dir) -> tuple[dict, list[dict]]:
    """(summary, per-request records) of a run with --capture-per-request."""
    out_dir = Path(out_dir)
    prediction = orjson.loads((out_dir / "prediction.json").read_bytes())
    records = [orjson.loads(line) for line in (out_dir / "requests.jsonl").read_bytes().splitlines()]
    return prediction["summary"], records


def output_bytes(out_dir) -> tuple[bytes, bytes]:
    """prediction.json and requests.jsonl of a run as bytes, for byte-identity checks."""
    out_dir = Path(out_dir)
    return (out_dir / "prediction.json").read_bytes(), (out_dir / "requests.jsonl").read_bytes()


def shared_trace(name: str) -> Path:
    """The real Mooncake trace `name` from SHARED_TRACES; fails the test, without a traceback, when it is missing."""
    path = SHARED_TRACES / name
    if not path.is_file():
        pytest.fail(f"missing real trace {path}: the tests expect the shared/ directory (with traces/) beside the "
                    f"repository root {ROOT}", pytrace=False)
    return path
