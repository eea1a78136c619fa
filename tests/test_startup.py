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
