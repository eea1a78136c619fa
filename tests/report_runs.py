"""Run folders for the report and diff tests: small replays of the host-offload example, made once per session."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

from kvreplay.cli import main

from .support import ROOT

EXAMPLE = str(ROOT / "examples" / "host-offload-prediction.yaml")
SMALL = ["--set", "traffic.stop.sessions=4"]  # 16 requests: a page small enough to keep as a golden file
G1 = "engine.workers.aggregated.kv_cache.capacity.blocks"


def predict(folder: Path, *extra: str) -> Path:
    """`kvreplay predict` of the example into `folder` (stdout kept quiet); the folder."""
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["predict", "-c", EXAMPLE, "--output-dir", str(folder), "--overwrite", *extra])
    assert code == 0
    return folder


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()
