"""One benchmarked process: a `predict` command run to completion, with its wall time, its own peak RSS and CPU time.

Shared by the benchmarks that time whole processes of kvreplay (or of AISimulate on the same file)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KVREPLAY = [sys.executable, "-m", "kvreplay", "predict", "-c"]


def run(command: list[str], output: Path, cwd: Path | None = None) -> tuple[float, float, dict, float]:
    """(wall s, peak RSS MB, summary, CPU s) of one predict process writing into `output` (CPU time: what a
    loaded machine changes least); `cwd` picks the checkout whose package `-m kvreplay` imports."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen([*command, "--output-dir", str(output), "--overwrite", "--format", "json"],
                                 stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest of all so far
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(command)} failed:\n{err.read().decode()[-2000:]}")
        printed = json.loads(out.read())
        return (wall, usage.ru_maxrss / 1024, printed.get("summary", printed),  # (AISimulate's keys are top level)
                usage.ru_utime + usage.ru_stime)
