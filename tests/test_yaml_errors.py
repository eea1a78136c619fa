"""YAML syntax errors (issue 19, item 7): at the problem, with where an unclosed bracket or quote was opened as a
secondary label, in the text report (quoted, with its caret) and the JSON report."""
from __future__ import annotations

import json

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file
from kvreplay.compiler.spans import Span


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_an_unclosed_list_is_shown_where_it_was_opened(tmp_path, capsys):
    path = _write(tmp_path, "engine:\n  model: m\n  list: [1, 2\n  hardware: h\n")
    (d,) = compile_file(path).diagnostics
    assert (d.code, d.span, d.labels) == ("YAML-SYNTAX", Span(4, 11),
                                          (("the flow sequence was opened here", Span(3, 9)),))
    assert main(["validate", path]) == 1
    assert capsys.readouterr().err == (
        f"{path}:4:11: error[YAML-SYNTAX] YAML syntax error: expected ',' or ']', but got ':'\n"
        "      hardware: h\n"
        "              ^\n"
        f"  note: the flow sequence was opened here: {path}:3:9\n"
        "      list: [1, 2\n"
        "            ^\n"
        "  hint: close the flow sequence opened at line 3 with `]`, or fix the YAML syntax here\n"
        "1 error in 1 of 1 file\n")


def test_an_unclosed_quote_and_mapping(tmp_path, capsys):
    (d,) = compile_file(_write(tmp_path, "engine:\n  model: 'abc\n  hardware: h\n")).diagnostics
    assert d.labels == (("the quoted scalar was opened here", Span(2, 10)),) and "with its quote" in d.hint
    (d,) = compile_file(_write(tmp_path, "engine: {model: m\n")).diagnostics
    assert d.labels == (("the flow mapping was opened here", Span(1, 9)),) and "with `}`" in d.hint
    assert main(["validate", "--format", "json", str(tmp_path / "c.yaml")]) == 1
    (reported,) = json.loads(capsys.readouterr().out)["files"][0]["diagnostics"]
    assert reported["labels"] == [{"label": "the flow mapping was opened here", "line": 1, "column": 9}]


def test_an_indentation_error_names_the_mapping_it_breaks(tmp_path):
    (d,) = compile_file(_write(tmp_path, "a:\n  b: 1\n c: 2\n")).diagnostics
    assert d.code == "YAML-SYNTAX" and d.labels == (("the block mapping starts here", Span(1, 1)),)
    assert d.hint.startswith("fix the YAML syntax at this position")


def test_an_error_without_a_context_has_no_label(tmp_path):
    (d,) = compile_file(_write(tmp_path, "a: b: c\n")).diagnostics
    assert d.code == "YAML-SYNTAX" and d.labels == ()
