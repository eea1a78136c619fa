"""Plan pass: every example compiles, its canonical plan is a golden file, and bytes are stable."""
from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from kvreplay.compiler.pipeline import compile_file

from .golden import golden_extension
from .support import EXAMPLES, ROOT

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml")) + sorted((EXAMPLES / "opal").glob("*.json"))  # + opal configs


def golden_name(path) -> str:
    return f"opal-{path.stem}" if path.parent.name == "opal" else path.stem


@pytest.fixture
def golden_plans(snapshot):
    return snapshot.use_extension(golden_extension("plans"))


def test_there_are_at_least_nine_examples():
    assert len(EXAMPLE_FILES) >= 9
    assert (EXAMPLES / "host-offload-prediction.yaml").exists()


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=golden_name)
def test_example_plan_is_golden(path, golden_plans):
    result = compile_file(path)
    assert result.ok, result.diagnostics
    assert orjson.loads(result.plan.canonical_json()) == golden_plans(name=golden_name(path))


def test_canonical_json_is_byte_identical_across_hash_seeds():
    example = str(EXAMPLES / "disaggregated-pd.yaml")
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-m", "kvreplay", "compile", example], env=env, cwd=ROOT,
                              capture_output=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1


def test_key_order_of_the_input_does_not_change_the_plan(tmp_path):
    text = (EXAMPLES / "g2-cluster-shared.yaml").read_text()
    engine, traffic = text.split("traffic:")
    reordered = tmp_path / "reordered.yaml"
    reordered.write_text("traffic:" + traffic + engine)
    assert compile_file(reordered).plan.canonical_json() == compile_file(EXAMPLES / "g2-cluster-shared.yaml").plan.canonical_json()
