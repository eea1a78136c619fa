"""A replay that is valid but too long to be meant (issue 19, item 3): refused before it starts, with the estimate,
the limit and `--max-work`; a long run shows progress on a terminal and answers Ctrl-C within a second."""
from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from kvreplay.cli import main
from kvreplay.compiler import work
from kvreplay.compiler.pipeline import compile_file
from kvreplay.runtime.shell.replay import Replay

from .support import EXAMPLES

G1 = str(EXAMPLES / "g1-default-capacity.yaml")
SESSIONS = str(EXAMPLES / "host-offload-prediction.yaml")
MANY = "traffic.stop.requests=10000000"


def test_estimate_counts_prompt_blocks_output_tokens_and_ranks():
    # 200 requests of 2,048 + 256 tokens in 64-token blocks on two ranks: 200 * (32 + 256) + 2 * 10,000
    steps, words, pointer = work.estimate(compile_file(G1).plan.records)
    assert steps == 200 * (2048 // 64 + 256) + 2 * work.WORK_PER_RANK == 77_600
    assert pointer == "/traffic/stop/requests" and words.startswith("200 requests: 409,600 prompt tokens")


def test_a_session_turn_rereads_its_history():
    # 16 sessions of 4 turns of 1,024 new + 128 output tokens: turn k's prompt is 1,024 + (k - 1) * 1,152 tokens
    steps, _, pointer = work.estimate(compile_file(SESSIONS).plan.records)
    prompt = 16 * sum(1024 + k * 1152 for k in range(4))
    assert steps == prompt // 16 + 16 * 4 * 128 + work.WORK_PER_RANK and pointer == "/traffic/stop/sessions"


def test_a_huge_run_is_refused_before_it_starts(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(Replay, "run", lambda self: pytest.fail("the replay ran"))
    start = time.perf_counter()
    assert main(["predict", "-c", G1, "--set", MANY, "--output-dir", str(tmp_path / "out")]) == 2
    assert time.perf_counter() - start < 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "error[" in line]
    assert line.startswith("--set #1:1:23: error[WORK-LIMIT] traffic.stop.requests: the replay would take about "
                           "2.88e9 steps (10,000,000 requests")
    assert "more than the work limit of 1e9 steps" in line and "`--max-work 2.9e9`" in err
    assert not (tmp_path / "out").exists()


def test_max_work_is_the_limit(capsys, tmp_path):
    out = str(tmp_path / "out")
    assert main(["predict", "-c", G1, "--max-work", "77599", "--output-dir", out, "--no-progress"]) == 2
    assert "more than the work limit of 77,599 steps" in capsys.readouterr().err
    assert main(["predict", "-c", G1, "--max-work", "77600", "--output-dir", out, "--no-progress"]) == 0


@pytest.mark.parametrize("value", ["many", "0", "-5", "1e40", "nan"])
def test_a_bad_max_work_is_a_usage_error(capsys, value):
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "-c", G1, "--max-work", value])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "argument --max-work" in err and "Traceback" not in err


def _long_run(tmp_path, **kwargs) -> subprocess.Popen:
    command = [sys.executable, "-m", "kvreplay", "predict", "-c", G1, "--set", MANY, "--max-work", "1e10",
               "--output-dir", str(tmp_path / "out")]
    # (the child gets SIGINT's default action back: a suite started in the background, `nohup` or `cmd &` in a
    # script, runs with SIGINT ignored, which a child inherits, and Python then installs no KeyboardInterrupt)
    return subprocess.Popen(command, cwd=tmp_path, preexec_fn=_default_sigint, **kwargs)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_ends_a_long_run_within_a_second_with_one_line(tmp_path):
    child = _long_run(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3)  # (compiling and building take about a second; the replay is under way by now)
    assert child.poll() is None
    sent = time.perf_counter()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=10)
    assert time.perf_counter() - sent < 1
    assert child.returncode == 130 and err == b"kvreplay: interrupted\n" and out == b""
    assert not (tmp_path / "out" / "prediction.json").exists()


def test_a_long_run_shows_progress_on_a_terminal(tmp_path):
    leader, follower = pty.openpty()
    child = _long_run(tmp_path, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    seen, deadline = b"", time.monotonic() + 20
    while b"requests done" not in seen and time.monotonic() < deadline:
        if select.select([leader], [], [], 0.5)[0]:
            seen += os.read(leader, 4096)
    child.send_signal(signal.SIGINT)
    child.wait(timeout=10)
    os.close(leader)
    assert b"\rreplaying: " in seen and b"/10000000 requests done, t = " in seen
