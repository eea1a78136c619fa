"""Test helpers: repository paths and compiling YAML text."""
from __future__ import annotations

from pathlib import Path

from kvreplay.compiler.pipeline import compile_bytes

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TRAFFIC = "traffic: {source: {type: synthetic}, load: {type: concurrency, concurrency: 2}, stop: {requests: 4}}\n"


def compile_yaml(text: str, overrides=()):
    return compile_bytes(text.encode(), "test.yaml", overrides)


def codes(result) -> set[str]:
    return {d.code for d in result.diagnostics}
