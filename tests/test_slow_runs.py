"""Runs the fuzz benchmark found hanging (issue 19, item 1): each now ends within seconds with a clear status.

An opal run's work grows with its virtual time (per-second statistics, APC checks), so a tier of 1e-12 GB/s, a
rate of 1e-7 a second or a GPU of 1e-7 TFLOP/s ran for minutes on 110 requests: the work estimate now counts the
span (compiler/work_time.py) and refuses it with WORK-LIMIT at the field that makes it long.  In predict configs
a bandwidth, rate or speedup too small to be meant (1e-300 overflowed the replay's clock) is refused by a floor
rule (compiler/rules/floors.py).  Every run here is under a wall-clock alarm, so a hang fails instead of stalling.
"""
from __future__ import annotations

import json
import signal
import time
from contextlib import contextmanager

import pytest

from kvreplay.cli import main
from kvreplay.compiler import work, work_time
from kvreplay.compiler.pipeline import compile_file

from .support import EXAMPLES

OPAL = EXAMPLES / "opal"
SECONDS = 20  # compile and refuse (or finish) on a loaded 2-core machine; each hang ran past 20 s before


@contextmanager
def deadline(seconds: float = SECONDS):
    def hang(signum, frame):
        raise AssertionError(f"no end within {seconds} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def opal_config(tmp_path, example: str, change) -> str:
    """`example` (an opal config) changed by `change(document)`, beside links to its traces and model configs."""
    document = json.loads((OPAL / example).read_text())
    change(document)
    for folder in ("traces", "model-configs"):
        (tmp_path / folder).symlink_to(OPAL / folder)
    path = tmp_path / example
    path.write_text(json.dumps(document, indent=1))
    return str(path)


def predict(capsys, config: str, tmp_path, *extra: str) -> tuple[int, str]:
    start = time.perf_counter()
    with deadline():
        code = main(["predict", "-c", config, "--no-progress", "--output-dir", str(tmp_path / "out"), *extra])
    out, err = capsys.readouterr()
    assert time.perf_counter() - start < SECONDS
    assert "Traceback" not in out + err
    return code, out + err


def _tier(bandwidth):
    return lambda d: d["kvc"]["CPUMemory"].update(bandwidth_GBps=bandwidth)


def _rate(rate):
    return lambda d: d["workload"]["stages"][0]["workload_params"].update(request_rate=rate)


def _tflops(tflops):
    return lambda d: d["worker"]["hw"].update(tflops=tflops)


@pytest.mark.parametrize("example,change,field", [
    ("defaults_apc.json", _tier(1e-12), "kvc.CPUMemory.bandwidth_GBps"),  # 8.8 million years of APC checks
    ("defaults.json", _tier(1e-300), "kvc.CPUMemory.bandwidth_GBps"),  # (was an OverflowError)
    ("defaults.json", _rate(1e-7), "workload.stages"),  # 100 requests over 31 years of per-second statistics
    ("defaults.json", _tflops(1e-7), "worker.hw.tflops"),
])
def test_an_opal_run_spanning_years_is_refused_at_its_field(tmp_path, capsys, example, change, field):
    code, text = predict(capsys, opal_config(tmp_path, example, change), tmp_path)
    assert code == 2 and f"error[WORK-LIMIT] {field}:" in text, text
    assert "years of virtual time" in text and "--max-work" in text


def test_the_span_is_counted_per_second_and_examples_stay_far_below_the_limit():
    for example in ("defaults.json", "defaults_apc.json", "three_tiers.json", "ttl.json"):
        plan = compile_file(OPAL / example).plan.records
        steps, words, pointer = work.estimate(plan)
        assert steps < 10**8, (example, words)  # (the default limit is 10^9)
    # defaults.json: 100 requests at 2 a second, then a trace of 10 rows: at least 50 s, at 2 steps a second
    plan = compile_file(OPAL / "defaults.json").plan.records
    timed, words, pointer = work_time.per_second_work(plan, 0, 0)
    assert timed >= 2 * 50 and words.endswith("at 2 steps a second")


def test_a_slow_but_real_tier_still_runs(tmp_path, capsys):
    """1e-3 GB/s (1 MB/s) is slow, not absurd: its 4,059 s of virtual time replay in about a second."""
    config = opal_config(tmp_path, "defaults_apc.json", _tier(1e-3))
    code, text = predict(capsys, config, tmp_path)
    assert code == 0, text


@pytest.mark.parametrize("example,old,new,code", [
    ("host-offload-prediction.yaml", "d2h_bandwidth_gbps: 32.0", "d2h_bandwidth_gbps: 1e-300", "LINK-BANDWIDTH-FLOOR"),
    ("kvcr-peer-fetch.yaml", "bandwidth_gbps: 50.0", "bandwidth_gbps: 1e-12", "LINK-BANDWIDTH-FLOOR"),
    ("g1-default-capacity.yaml", "requests_per_second: 4.0", "requests_per_second: 1e-300", "TRAFFIC-RATE-FLOOR"),
    ("mooncake-trace.yaml", "speedup: 1.0", "speedup: 1e-300", "TRAFFIC-SPEEDUP-FLOOR"),
])
def test_a_predict_quantity_too_small_to_be_meant_is_refused(tmp_path, capsys, example, old, new, code):
    text = (EXAMPLES / example).read_text()
    assert old in text
    (tmp_path / "traces").symlink_to(EXAMPLES / "traces")
    config = tmp_path / example
    config.write_text(text.replace(old, new, 1))
    status, output = predict(capsys, str(config), tmp_path)
    assert status == 2 and f"error[{code}]" in output, output


def test_kvcr_with_an_unlimited_link_finishes(tmp_path, capsys):
    """`bandwidth_gbps: 0` means unlimited: the KV-aware trace replays, pulling from peers, and ends."""
    (tmp_path / "traces").symlink_to(EXAMPLES / "traces")
    config = tmp_path / "kvcr.yaml"
    config.write_text((EXAMPLES / "kvcr-kv-aware-trace.yaml").read_text().replace("bandwidth_gbps: 50.0",
                                                                                 "bandwidth_gbps: 0"))
    code, text = predict(capsys, str(config), tmp_path)
    assert code == 0, text
    summary = json.loads((tmp_path / "out" / "prediction.json").read_text())
    assert (summary["num_requests"], summary["completed_requests"]) == (200, 187)  # (as at 50 GB/s: the rest are cut)


def test_kvcr_with_endless_sessions_is_refused_before_it_runs(tmp_path, capsys):
    config = tmp_path / "kvcr.yaml"
    config.write_text((EXAMPLES / "kvcr-peer-fetch.yaml").read_text().replace("bandwidth_gbps: 50.0",
                                                                             "bandwidth_gbps: 0"))
    code, text = predict(capsys, str(config), tmp_path, "--set", "traffic.source.session.turns=65535",
                         "--set", "traffic.stop.sessions=100000")
    assert code == 2 and "error[WORK-LIMIT] traffic.stop.sessions:" in text, text
