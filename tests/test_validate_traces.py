"""`kvreplay validate` reads the traces a config names: a missing, empty or bad trace is an invalid config.

Each case exits 1 with no traceback; the text report positions the problem in the trace itself
(`file:line`) and notes where the config names the trace; the JSON report has the same as fields.
The configs are the TRACE-* files of the negative corpus (golden/specs/negative/), whose traces
lie beside them; a wrong `hash_ids` length on its own is written to tmp_path.
"""
from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file

from .support import EXAMPLES

NEGATIVE = Path(__file__).resolve().parent.parent / "golden" / "specs" / "negative"

# config -> (code, trace lines reported, a piece of the message)
CASES = {
    "TRACE-FILE.yaml": ("TRACE-FILE", [1], "cannot read the trace"),
    "TRACE-EMPTY.yaml": ("TRACE-EMPTY", [1], "the trace has no rows"),
    "TRACE-ROW.yaml": ("TRACE-ROW", [2, 3, 4], "2 hash_ids for 1100 tokens"),
}


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", sorted(CASES))
def test_validate_text_names_the_trace_line_and_the_config_position(capsys, name):
    code_name, lines, message = CASES[name]
    config = NEGATIVE / name
    trace = NEGATIVE / name.replace(".yaml", ".jsonl")
    code, out, err = run(capsys, "validate", config)
    assert code == 1 and "Traceback" not in out + err
    assert out == ""  # (diagnostics on stderr)
    for line in lines:
        assert f"{trace}:{line}:1: error[{code_name}]" in err
    assert message in err
    assert f"note: named by {config}:" in err and "traffic.source.paths[0]" in err
    assert f"{trace}:5:" not in err  # the good last row of TRACE-ROW is not reported


@pytest.mark.parametrize("name", sorted(CASES))
def test_validate_json_names_the_trace_line_and_the_config_position(capsys, name):
    code_name, lines, _ = CASES[name]
    code, out, _ = run(capsys, "validate", "--format", "json", NEGATIVE / name)
    assert code == 1
    (entry,) = json.loads(out)["files"]
    assert entry["valid"] is False and entry["stage"] == "traces"
    assert [(d["code"], d["line"]) for d in entry["diagnostics"]] == [(code_name, line) for line in lines]
    for d in entry["diagnostics"]:
        assert d["file"] == str(NEGATIVE / name.replace(".yaml", ".jsonl"))
        assert d["named_by"]["file"] == str(NEGATIVE / name)
        assert d["named_by"]["path"] == "traffic.source.paths[0]" and d["named_by"]["line"] == 9 + (name == "TRACE-ROW.yaml")


def test_validate_reports_a_wrong_hash_ids_length_alone(tmp_path, capsys):
    rows = [{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]},
            {"timestamp": 1, "input_length": 600, "output_length": 4, "hash_ids": [1, 2, 3]}]  # needs 2
    (tmp_path / "t.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    config = tmp_path / "c.yaml"
    config.write_text((NEGATIVE / "TRACE-ROW.yaml").read_text().replace("TRACE-ROW.jsonl", "t.jsonl"))
    code, _, err = run(capsys, "validate", config)
    assert code == 1
    assert f"{tmp_path / 't.jsonl'}:2:1: error[TRACE-ROW] hash_ids: 3 hash_ids for 600 tokens" in err
    assert f"{tmp_path / 't.jsonl'}:1:" not in err


def test_validate_accepts_a_good_trace(capsys):
    code, out, _ = run(capsys, "validate", Path(__file__).resolve().parent.parent / "examples" / "mooncake-trace.yaml")
    assert code == 0 and "1 file valid" in out


def test_a_trace_of_bad_lines_reports_the_first_twenty(tmp_path):
    """(Issue 19, item 5) the error cap holds for lines that are not JSON too: 20 diagnostics, not 5,000."""
    (tmp_path / "bad.jsonl").write_text("not json\n" * 5000)
    config = tmp_path / "c.yaml"
    config.write_text((EXAMPLES / "mooncake-trace.yaml").read_text().replace("traces/conversation-200.jsonl",
                                                                            "bad.jsonl"))
    result = compile_file(config)
    assert [d.span.line for d in result.diagnostics] == list(range(1, 21))
    assert {d.code for d in result.diagnostics} == {"TRACE-ROW"}


def test_an_endless_config_is_refused_quickly(capsys):
    """(Issue 19, item 5) /dev/zero as a config: read up to the size limit only, LOAD-SIZE, exit 1."""
    assert main(["validate", "/dev/zero"]) == 1
    assert "error[LOAD-SIZE]" in capsys.readouterr().err


def test_a_trace_row_asking_for_more_tokens_than_can_be_meant(tmp_path):
    (tmp_path / "big.jsonl").write_text(json.dumps({"timestamp": 0, "input_length": 512, "output_length": 10 ** 11,
                                                    "hash_ids": [1]}) + "\n")
    config = tmp_path / "c.yaml"
    config.write_text((EXAMPLES / "mooncake-trace.yaml").read_text().replace("traces/conversation-200.jsonl",
                                                                            "big.jsonl"))
    (d,) = compile_file(config).diagnostics
    assert (d.code, d.pointer, d.span.line) == ("TRACE-ROW", "/output_length", 1)
    assert "from 1 to 2147483647" in d.message
