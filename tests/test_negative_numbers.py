"""The negative corpus of bad numbers: golden/specs/negative/numbers/, one file per case.

A NaN, infinities (YAML and JSON), integers or floats past any field's limit, negatives, zeros where a
field needs at least one, and fractions where it counts whole things.
Several cases share a code, so a file is named `<CODE>.<case>.<ext>` (the main corpus
keeps one file per code); its JSON report is pinned with a syrupy snapshot like the
main corpus's.  Regenerate with
``python -m pytest tests/test_negative_numbers.py --snapshot-update``.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from kvreplay.compiler.pipeline import compile_file

from .test_negative_corpus import NEGATIVE_DIR, portable_report

NUMBERS_DIR = NEGATIVE_DIR / "numbers"
FILES = sorted(p for p in NUMBERS_DIR.iterdir() if p.suffix in (".yaml", ".json"))


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def test_every_class_of_bad_number_has_a_file():
    assert {p.name.split(".")[0] for p in FILES} == {"LOAD-NONFINITE", "JSON-SYNTAX", "SCHEMA-RANGE", "SCHEMA-TYPE"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_bad_number_file_fails_with_its_code_at_each_value(path: Path):
    result = compile_file(path)
    assert not result.ok and result.stage in ("load", "validate")
    assert {d.code for d in result.diagnostics} == {path.name.split(".")[0]}
    lines = path.read_text().splitlines()
    for d in result.diagnostics:
        assert d.span is not None and d.span.line >= 1 and d.span.col >= 1, d
        field = d.pointer.rsplit("/", 1)[-1]
        assert (d.code == "SCHEMA-TYPE" or f"`{field}`" in d.message) and d.hint.strip(), d  # (a type: by its path)
        assert lines[d.span.line - 1][d.span.col - 1:].split(",")[0].split("}")[0].strip(), d  # at the value


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_bad_number_file_json_report(path: Path, snapshot_json):
    assert portable_report(path) == snapshot_json
