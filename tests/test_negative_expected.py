"""Each bad-number, missing-section and YAML-layout file of the negative corpus with its exact diagnostics (issue
19): golden/specs/negative/{numbers,sections,syntax}/X beside X.expected, the text report as a person reads it
(repository-relative paths; quoted lines and carets for syntax/, where they are the point).  A class of bad
number, a section or a syntax case that has no file fails here."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvreplay.compiler.pipeline import compile_file
from kvreplay.report import text_report

from .test_negative_corpus import NEGATIVE_DIR, REPO_ROOT

FOLDERS = ("numbers", "sections", "syntax")
FILES = sorted(p for sub in FOLDERS for p in (NEGATIVE_DIR / sub).iterdir() if p.suffix in (".yaml", ".json"))
# every class of bad number issue 19 names, and every section a config cannot do without
NUMBER_CASES = {"nan", "infinity", "huge-integers", "huge-numbers", "negative", "zero", "float-for-integer"}
SECTION_CASES = {"engine", "engine-model", "engine-hardware", "trace-paths", "g3-offload", "workers", "opal-model",
                 "opal-workload"}
SYNTAX_CASES = {"unclosed-quote", "unclosed-list", "indentation", "tab", "capacity"}  # (capacity: a duplicate key)


def report(path: Path) -> str:
    context = path.parent.name == "syntax"
    return text_report([compile_file(path)], context=context).replace(f"{REPO_ROOT}/", "")


def test_every_class_has_a_file():
    cases = {folder: {p.name.split(".")[1] for p in FILES if p.parent.name == folder} for folder in FOLDERS}
    assert cases == {"numbers": NUMBER_CASES, "sections": SECTION_CASES, "syntax": SYNTAX_CASES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_file_gives_exactly_its_expected_diagnostics(path: Path):
    expected = path.with_name(path.name + ".expected").read_text()
    assert report(path) == expected
    assert {line.split("error[")[1].split("]")[0] for line in expected.splitlines() if "error[" in line} == \
        {path.name.split(".")[0]}  # (and the file's name is the code it gives)
