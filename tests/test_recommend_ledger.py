"""The recommend ledger and executors: resuming from a partial ledger, Ctrl-C leaving whole lines, and the
same ledger bytes from the in-process run, the process pool and a local Ray cluster."""
from __future__ import annotations

import sys

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.recommend import candidates, executors

from .test_recommend import SWEEP, sweep

FOUR = SWEEP.replace("    engine.workers.aggregated.parallelism: [{tensor: 1}, {tensor: 2}]\n", "")  # 2 x 2


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The 8-candidate sweep's ledger and recommendation, in-process."""
    code, out = sweep(tmp_path_factory.mktemp("reference"))
    assert code == 0
    return (out / "ledger.jsonl").read_bytes(), (out / "recommendation.json").read_bytes()


def counting(monkeypatch):
    seen = []
    real = candidates.evaluate

    def evaluate(job, report=None):
        seen.append(job.index)
        return real(job, report)
    monkeypatch.setattr(executors, "evaluate", evaluate)
    return seen


def test_a_rerun_resumes_from_a_partial_ledger(tmp_path, reference, monkeypatch):
    code, out = sweep(tmp_path)
    ledger = out / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:3]) + lines[3][:40])  # three whole lines and a torn fourth
    seen = counting(monkeypatch)
    assert sweep(tmp_path)[0] == 0
    assert seen == [3, 4, 5, 6, 7]  # the whole lines are kept, the torn one is run again
    assert (ledger.read_bytes(), (out / "recommendation.json").read_bytes()) == reference
    seen.clear()
    assert sweep(tmp_path)[0] == 0 and seen == []  # a finished ledger runs nothing
    assert (out / "recommendation.json").read_bytes() == reference[1]


def test_ctrl_c_leaves_whole_lines_and_the_rerun_completes(tmp_path, reference, monkeypatch):
    real = candidates.evaluate

    def interrupted(job, report=None):
        if job.index == 4:
            raise KeyboardInterrupt
        return real(job, report)
    monkeypatch.setattr(executors, "evaluate", interrupted)
    assert sweep(tmp_path)[0] == 130
    ledger = (tmp_path / "out" / "ledger.jsonl").read_bytes()
    assert ledger == b"".join(reference[0].splitlines(keepends=True)[:4])
    monkeypatch.setattr(executors, "evaluate", real)
    assert sweep(tmp_path)[0] == 0
    assert (tmp_path / "out" / "ledger.jsonl").read_bytes() == reference[0]


def test_a_ledger_of_another_search_is_not_resumed(tmp_path, capsys):
    sweep(tmp_path, FOUR)
    capsys.readouterr()
    code, _ = sweep(tmp_path, FOUR.replace("output_tokens: 64", "output_tokens: 65"))
    assert code == 2 and "was written by another search" in capsys.readouterr().err
    assert sweep(tmp_path, FOUR.replace("output_tokens: 64", "output_tokens: 65"), "--overwrite")[0] == 0


def test_the_process_pool_writes_the_same_bytes(tmp_path, reference):
    code, out = sweep(tmp_path, SWEEP, "--jobs", "2")
    assert code == 0
    assert ((out / "ledger.jsonl").read_bytes(), (out / "recommendation.json").read_bytes()) == reference


def test_ray_missing_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # (import ray now raises ImportError)
    code, _ = sweep(tmp_path, FOUR, "--executor", "ray")
    assert code == 2
    assert capsys.readouterr().err == ("kvreplay: --executor ray needs Ray, which is not installed: "
                                       "pip install 'kvreplay[ray]'\n")


def test_a_ray_address_nothing_answers_at_is_a_clear_error_in_seconds(tmp_path, capsys):
    """Ray itself retries a dead address for minutes; the sweep says so at once and runs nothing."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        monkey = {"ray": sys.modules.get("ray")}
        sys.modules["ray"] = type(sys)("ray")  # (no real Ray needed: the address is refused before it is used)
        try:
            start = time.monotonic()
            code, out = sweep(tmp_path, FOUR, "--executor", "ray", "--address", f"127.0.0.1:{port}")
        finally:
            if monkey["ray"] is None:
                del sys.modules["ray"]
            else:
                sys.modules["ray"] = monkey["ray"]
    assert code == 2 and time.monotonic() - start < 10
    assert capsys.readouterr().err == (f"kvreplay: nothing answers at the Ray address 127.0.0.1:{port}: start the "
                                       "cluster (`ray start --head`) or correct --address\n")
    assert not (out / "ledger.jsonl").exists() or not (out / "ledger.jsonl").read_bytes()
    assert executors.answers("auto") and executors.answers("ray://")


def test_a_local_ray_cluster_writes_the_pool_ledger_byte_for_byte(tmp_path):
    (tmp_path / "pool").mkdir()
    code, pool = sweep(tmp_path / "pool", FOUR, "--jobs", "2")
    assert code == 0
    config = tmp_path / "pool" / "sweep.yaml"
    assert main(["recommend", "-c", str(config), "--output-dir", str(tmp_path / "ray"), "--executor", "ray",
                 "--jobs", "2"]) == 0
    assert (tmp_path / "ray" / "ledger.jsonl").read_bytes() == (pool / "ledger.jsonl").read_bytes()
    assert len((pool / "ledger.jsonl").read_bytes().splitlines()) == 4
    lines = [orjson.loads(line) for line in (pool / "ledger.jsonl").read_bytes().splitlines()]
    assert [e["status"] for e in lines] == ["ok"] * 4


def test_progress_shows_the_sweep_and_each_candidate_in_flight():
    import io

    from kvreplay.recommend.command import Progress

    stream = io.StringIO()
    progress = Progress(16, True, stream)
    progress.running([(4, 120, 800), (5, 0, 800)])
    progress(5, {"status": "ok"})
    progress.close()
    shown = stream.getvalue().split("\r")
    assert shown[1].rstrip() == "recommend: 0/16 candidates (none yet) | #4 120/800 | #5 0/800"
    assert shown[2].rstrip() == "recommend: 5/16 candidates (1 ok)"
    assert Progress(16, False, stream) and stream.getvalue().endswith("\r")


def test_a_candidate_reports_its_requests_as_they_end(tmp_path):
    from kvreplay.recommend import space

    config = tmp_path / "c.yaml"
    config.write_text(FOUR.replace("requests: 16", "requests: 1200").replace("input_tokens: 2000", "input_tokens: 64"))
    from kvreplay.compiler.load import load_bytes

    document, domains = space.extract(load_bytes(config.read_bytes(), str(config)).document)
    knobs = space.candidates(domains)[0]
    heard = []
    job = candidates.Job(0, knobs, orjson.dumps(space.apply(document, knobs)), str(config), 10**12)
    entry = candidates.evaluate(job, lambda *row: heard.append(row))
    assert entry["status"] == "ok" and entry["results"]["completed_requests"] == 1200
    assert heard and {(i, t) for i, _, t in heard} == {(0, 1200)}
    assert [d for _, d, _ in heard] == sorted(d for _, d, _ in heard) and heard[-1][1] <= 1200
