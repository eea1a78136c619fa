"""Test helpers that several test modules share: repository paths, config text, reading a run's outputs.
(Hand-built trace scenarios are in tests/scenarios.py.)"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
import gzip
import shutil
import tempfile
from pathlib import Path

import orjson

from kvreplay.compiler.pipeline import compile_bytes

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
VENDORED_TRACES = ROOT / "tests" / "data" / "traces"  # the real Mooncake traces, gzipped (see its README)
_UNPACKED: dict[str, Path] = {}
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
    return {k: v for k, v in prediction.items() if k != "kvreplay_plan_version"}, records


def output_bytes(out_dir) -> tuple[bytes, bytes]:
    """prediction.json and requests.jsonl of a run as bytes, for byte-identity checks."""
    out_dir = Path(out_dir)
    return (out_dir / "prediction.json").read_bytes(), (out_dir / "requests.jsonl").read_bytes()


def distinct_outputs(config, tmp_path) -> set:
    """The distinct (prediction.json, requests.jsonl) of one config run under PYTHONHASHSEED 0 and 77 and once
    single-stepped: one element when the replay is deterministic and fusing passes changes nothing."""
    outputs = set()
    for seed, extra in (("0", ()), ("77", ()), ("0", ("--single-step",))):
        out = Path(tmp_path) / f"out-{seed}{'-single' if extra else ''}"
        subprocess.run([sys.executable, "-m", "kvreplay", "predict", "-c", str(config), "--output-dir", str(out),
                        "--capture-per-request", "--no-progress", *extra], env=dict(os.environ, PYTHONHASHSEED=seed),
                       cwd=ROOT, capture_output=True, check=True)
        outputs.add(output_bytes(out))
    return outputs


def shared_trace(name: str) -> Path:
    """The real Mooncake trace `name` (e.g. "synthetic_trace.jsonl"), unpacked once per test process from
    tests/data/traces/ into a temporary folder."""
    if name not in _UNPACKED:
        folder = Path(tempfile.mkdtemp(prefix="kvreplay-traces-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / name
        path.write_bytes(gzip.decompress((VENDORED_TRACES / f"{name}.gz").read_bytes()))
        _UNPACKED[name] = path
    return _UNPACKED[name]
