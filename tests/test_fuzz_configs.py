"""Fuzzed configs (issue 19's acceptance): every example mutated — extreme, zero, negative, float, huge and
non-finite numbers, swapped enum words, dropped and added keys — ends with exit 0, 1 or 2 and no traceback,
`validate` within 2 s and `predict` within its work limit (tests/fuzz.py; benchmarks/fuzz_configs.py runs
thousands)."""
from __future__ import annotations

import os

import orjson

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import fuzz

EXAMPLES = int(os.environ.get("KVREPLAY_FUZZ_CONFIGS", "200"))  # ~40 s on a loaded 2-core machine


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_mutated_examples_keep_the_clis_promises(data):
    def choose(options):
        return data.draw(st.sampled_from(options))

    source, base = choose(fuzz.BASES)
    problem = fuzz.run(source, fuzz.mutate(choose, base), choose(["yaml", "json"]))
    assert problem is None, problem


def test_the_runner_sees_a_crash(monkeypatch):
    """The runner reports an exception that reaches the user (so that the test above can fail)."""
    def broken(spec):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("kvreplay.compiler.passes.validate.run", broken)
    monkeypatch.setattr("kvreplay.compiler.pipeline.PASSES", (("validate", broken),))
    source, base = fuzz.BASES[0]
    problem = fuzz.run(source, base, "yaml")
    assert problem is not None and "crash" in problem and "ZeroDivisionError" in problem


def test_the_runner_sees_a_hang(monkeypatch):
    """A pass that computes forever is stopped at the CPU-time limit and reported (not waited for)."""
    def endless(spec):
        while True:
            pass

    monkeypatch.setattr(fuzz, "VALIDATE_SECONDS", 0.2)
    monkeypatch.setattr("kvreplay.compiler.pipeline.PASSES", (("validate", endless),))
    source, base = fuzz.BASES[0]
    problem = fuzz.run(source, base, "yaml")
    assert problem is not None and "hang: no end within 1 CPU s" in problem


def test_tensor_parallelism_without_nvlink_bandwidth_runs(tmp_path):
    """Found by the fuzzer: an opal GPU (no NVLink bandwidth) at tp 2 crashed in the roofline's all-reduce; opal's
    roofline of worker.hw has no all-reduce term, so tp 2 runs, and each pass is quicker than at tp 1."""
    from kvreplay.cli import main

    config = str(fuzz.EXAMPLES / "opal" / "defaults.json")
    durations = {}
    for tp in (1, 2):
        out = tmp_path / f"tp{tp}"
        assert main(["predict", "-c", config, "--set", f"worker.hw.tp={tp}", "--output-dir", str(out),
                     "--no-progress"]) == 0
        durations[tp] = orjson.loads((out / "prediction.json").read_bytes())["mean_ttft_ms"]
    assert durations[2] < durations[1]
