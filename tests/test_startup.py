"""Start-up (issue 20 item 3): the CLI builds its parser without importing the replay runtime or numpy, so
`validate`, `compile`, `--help` and a usage error pay only for the compiler."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kvreplay.examples


def test_importing_the_cli_leaves_the_runtime_and_numpy_unloaded():
    probe = ("import sys, kvreplay.cli; "
             "print(sorted(m for m in ('numpy', 'kvreplay.runtime.build', 'kvreplay.runtime.analysis.explain') "
             "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_validate_runs_without_the_runtime():
    config = Path(kvreplay.examples.__file__).parent / "g1-default-capacity.yaml"
    probe = ("import sys; from kvreplay.cli import main; code = main(['validate', sys.argv[1]]); "
             "print(code, 'numpy' in sys.modules, 'kvreplay.runtime.build' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(config)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 False False"


def test_a_predict_run_imports_neither_numpy_nor_the_other_commands(tmp_path):
    """A replay without --explain-misses needs no miss analysis (numpy), no search and no HTML page: the parser
    of `recommend`, `deploy` and `report` is built without their modules."""
    config = Path(kvreplay.examples.__file__).parent / "g1-default-capacity.yaml"
    unwanted = ("numpy", "kvreplay.runtime.analysis.explain", "kvreplay.recommend.executors",
                "kvreplay.recommend.ledger", "kvreplay.recommend.space", "kvreplay.report_html.page",
                "kvreplay.report_html.load")
    probe = ("import sys; from kvreplay.cli import main; "
             "code = main(['predict', '-c', sys.argv[1], '--output-dir', sys.argv[2], '--format', 'json']); "
             f"print(code, sorted(m for m in {unwanted!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe, str(config), str(tmp_path / "out")], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip().splitlines()[-1].endswith("0 []")
    assert (tmp_path / "out" / "prediction.json").is_file()
