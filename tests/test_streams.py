"""One stream convention for every command (issue 19, item 7): diagnostics on stderr, results on stdout, so
`kvreplay X > out.json` never captures an error and a pipe never carries half a report."""
from __future__ import annotations

import json

import pytest

from kvreplay.cli import main

from .support import EXAMPLES

HOST = str(EXAMPLES / "host-offload-prediction.yaml")


@pytest.fixture
def bad(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text((EXAMPLES / "host-offload-prediction.yaml").read_text().replace("backend: vllm",
                                                                                    "backend: sglang"))
    return str(path)


COMMANDS = {
    "validate": lambda config, out: ["validate", config],
    "compile": lambda config, out: ["compile", config],
    "explain": lambda config, out: ["explain", config],
    "predict": lambda config, out: ["predict", "-c", config, "--output-dir", out, "--no-progress"],
    "deploy": lambda config, out: ["deploy", config],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_diagnostics_go_to_stderr_and_nothing_to_stdout(command, bad, tmp_path, capsys):
    code = main(COMMANDS[command](bad, str(tmp_path / "out")))
    out, err = capsys.readouterr()
    assert code in (1, 2) and out == ""
    assert f"{bad}:" in err and "error[G2-BACKEND]" in err and "hint: use `backend: vllm`" in err


@pytest.mark.parametrize("command", ["validate", "compile", "explain"])
def test_results_go_to_stdout_and_nothing_to_stderr(command, tmp_path, capsys):
    assert main(COMMANDS[command](HOST, str(tmp_path / "out"))) == 0
    out, err = capsys.readouterr()
    assert err == "" and out
    if command == "compile":
        assert json.loads(out)["engine"]["backend"] == "vllm"


def test_validate_json_is_a_result_on_stdout_even_for_an_invalid_file(bad, capsys):
    assert main(["validate", "--format", "json", bad]) == 1
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["summary"] == {"files": 1, "invalid_files": 1, "errors": 1}


def test_quiet_validate_prints_nothing_for_valid_files_and_the_diagnostics_for_invalid_ones(bad, capsys):
    assert main(["validate", "--quiet", HOST]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["validate", "--quiet", HOST, bad]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("1 error in 1 of 2 files\n")
