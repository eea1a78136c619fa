"""The negative corpus: one small config per diagnostic code, in golden/specs/negative/.

Each file is named after the code it must produce (`G2-BACKEND.yaml` ->
``G2-BACKEND``) and is otherwise a valid config, so compiling it yields
diagnostics of exactly that code (where a config must also break a more general
rule, the specific rule `supersedes` it, e.g. G3-MTP over G2-MTP).  Rule ids come from
`kvreplay.compiler.rules.all_rules()`; the loader/schema/catalog codes
(YAML-*, JSON-*, LOAD-*, SCHEMA-*, CATALOG-*) have files of their own.  A file is
predict YAML or a native ReplaySpec (`.json`; its top-level `description` says
what is wrong, JSON having no comments): the ReplaySpec-only rules (REPLAYSPEC-*,
and the BELADY-* constraints, which predict YAML reports as BELADY-PREDICT) have
`.json` files.
The JSON report of every file is pinned with a syrupy snapshot
(tests/__snapshots__/); regenerate with
``python -m pytest tests/test_negative_corpus.py --snapshot-update``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from kvreplay.compiler.pipeline import compile_file
from kvreplay.compiler.rules import all_rules
from kvreplay.report import json_report

REPO_ROOT = Path(__file__).resolve().parent.parent
NEGATIVE_DIR = REPO_ROOT / "golden" / "specs" / "negative"
CORPUS_SUFFIXES = (".yaml", ".yml", ".json")


def corpus_files() -> list[Path]:
    return sorted(p for p in NEGATIVE_DIR.iterdir() if p.is_file() and p.suffix in CORPUS_SUFFIXES)


FILES = corpus_files()


def relative(path: str) -> str:
    try:
        return Path(path).resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def test_corpus_is_not_empty():
    assert len(FILES) >= len(all_rules())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_negative_file_fails_with_its_code(path: Path):
    result = compile_file(path)
    assert not result.ok, f"{path.name} compiled cleanly"
    codes = {d.code for d in result.diagnostics}
    assert codes == {path.stem}
    for d in result.diagnostics:
        assert d.span is not None, d
        assert d.span.line >= 1, d
        assert d.span.col >= 1, d
        assert d.message.strip(), d
        assert d.hint.strip(), d


def portable_report(path: Path) -> dict:
    """The JSON report of `path` with the repository-relative file names a snapshot can hold."""
    report = json.loads(json_report([compile_file(path)]))
    for entry in report["files"]:
        entry["file"] = relative(entry["file"])
        for diagnostic in entry["diagnostics"]:
            diagnostic["file"] = relative(diagnostic["file"])
            if "named_by" in diagnostic:  # a trace's diagnostic also says where the config names the trace
                diagnostic["named_by"]["file"] = relative(diagnostic["named_by"]["file"])
    return report


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_negative_file_json_report(path: Path, snapshot_json):
    assert portable_report(path) == snapshot_json


def test_every_rule_has_a_negative_file():
    stems = {p.stem for p in FILES}
    missing = sorted(r.id for r in all_rules() if r.id not in stems)
    assert not missing, f"rules without a file in {NEGATIVE_DIR.relative_to(REPO_ROOT)}: {missing}"


def test_replayspec_negatives_are_json_files_of_the_corpus():
    rule_files = {p.stem: p.suffix for p in FILES if p.stem in {r.id for r in all_rules()}}
    replayspec_only = sorted(r.id for r in all_rules() if r.id.startswith("REPLAYSPEC-")
                             or (r.id.startswith("BELADY-") and r.id != "BELADY-PREDICT"))
    assert replayspec_only
    assert {rule: rule_files.get(rule) for rule in replayspec_only} == dict.fromkeys(replayspec_only, ".json")


def test_file_names_are_unique_codes():
    stems = [p.stem for p in FILES]
    assert len(stems) == len(set(stems))
