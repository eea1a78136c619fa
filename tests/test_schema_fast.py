"""The compiled schema check (compiler/schema_fast.py) gives jsonschema's verdict, so a valid config needs no jsonschema.

Every document any front-end checks while compiling the examples, the ReplaySpec goldens, the opal configs and the
whole negative corpus is checked both ways; so is every one-leaf mutation of the valid predict documents.
"""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from kvreplay.compiler import schema_check
from kvreplay.compiler.pipeline import compile_file
from kvreplay.compiler.schema_check import SchemaChecker, jsonschema_errors, validator
from kvreplay.compiler.schema_fast import compile_check
from kvreplay.schema import PREDICT, REPLAYSPEC

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for folder in ("examples", "golden/specs/negative", "golden/specs/replayspec", "tests/data/opal")
                  for p in (ROOT / folder).rglob("*") if p.suffix in (".yaml", ".yml", ".json")
                  and "model-configs" not in p.parts and p.name != "config.json")


def seen_documents(path: Path) -> list[tuple[SchemaChecker, object, bool]]:
    """(checker, document, fast verdict) for every schema check the compile of `path` makes."""
    seen = []
    original = SchemaChecker.certainly_valid

    def spy(self, document):
        verdict = original(self, document)
        seen.append((self, copy.deepcopy(document), verdict))
        return verdict

    SchemaChecker.certainly_valid = spy
    try:
        compile_file(path)
    finally:
        SchemaChecker.certainly_valid = original
    return seen


def test_the_fixtures_cover_every_kind_of_document():
    assert len(FIXTURES) > 200
    assert {p.suffix for p in FIXTURES} == {".yaml", ".json"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_checked_document_gets_jsonschemas_verdict(path: Path):
    for checker, document, fast in seen_documents(path):
        assert checker.certainly_valid(document) is fast  # (no state kept between documents)
        assert fast == (not jsonschema_errors(checker, document)), (path, document)


def test_the_corpus_has_both_verdicts_and_a_schema_error_of_each_kind():
    verdicts = {fast for path in FIXTURES[::7] for _, _, fast in seen_documents(path)}
    assert verdicts == {True, False}
    for code in ("SCHEMA-ENUM", "SCHEMA-RANGE", "SCHEMA-REQUIRED", "SCHEMA-TYPE", "SCHEMA-UNKNOWN-KEY"):
        found = [fast for _, _, fast in seen_documents(ROOT / "golden/specs/negative" / f"{code}.yaml")]
        assert found and found[0] is False, code


def leaves(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from leaves(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaves(value, path + (index,))
    else:
        yield path, node


def mutations(document: dict):
    """Each leaf replaced by values of other kinds and bounds; each mapping with a key removed or one unknown key."""
    swaps = (None, True, False, 0, -1, 1, 2.0, 0.5, 2 ** 63, "", "lru", "16", [], {}, [1])
    for path, value in leaves(document):
        for swap in (() if isinstance(value, dict) else swaps):
            if type(swap) is type(value) and swap == value:
                continue
            yield _set(document, path, swap)
        if isinstance(value, dict):
            yield _set(document, path, {**value, "bogus": 1})
            for key in value:
                yield _set(document, path, {k: v for k, v in value.items() if k != key})


def _set(document: dict, path: tuple, value) -> dict:
    if not path:
        return value
    out = copy.deepcopy(document)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


MUTATED = ["g1-default-capacity.yaml", "disaggregated-pd.yaml", "g2-cluster-shared.yaml", "kvcr-peer-fetch.yaml",
           "sglang-default-capacity.yaml", "kimi-k3-state-cache.yaml", "agentic/agentx-g2-local.yaml"]


@pytest.mark.parametrize("name", MUTATED)
def test_every_one_leaf_mutation_of_a_valid_config_gets_jsonschemas_verdict(name: str):
    predict = validator(PREDICT)
    documents = [d for c, d, fast in seen_documents(ROOT / "examples" / name) if c is predict and fast]
    assert documents, name
    verdicts = []
    for mutated in mutations(documents[0]):
        fast = predict.certainly_valid(mutated)
        assert fast == (not jsonschema_errors(predict, mutated)), mutated
        verdicts.append(fast)
    assert len(verdicts) > 100 and True in verdicts and False in verdicts


def test_schema_keywords_it_does_not_mirror_leave_the_verdict_to_jsonschema():
    assert compile_check({"type": "string", "pattern": "^a"}, {}) is None
    assert compile_check({"$ref": "#/$defs/missing"}, {}) is None
    assert compile_check({"prefixItems": [{"type": "integer"}]}, {}) is None
    checker = SchemaChecker({"type": "string", "pattern": "^a"})
    assert not checker.certainly_valid("abc")
    assert schema_check.errors_of(checker, "abc") == [] and schema_check.errors_of(checker, "b")


def test_its_keywords_as_jsonschema_reads_them():
    check = compile_check({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1},
                                                            "x": {"enum": [1, None, "a"]}, "c": {"const": True},
                                                            "m": {"type": "number", "exclusiveMaximum": 2}},
                           "additionalProperties": {"type": "string"}, "required": ["n"]}, {})
    assert check({"n": 1}) and check({"n": 2, "x": 1.0, "c": True, "m": 1.5, "other": "s"})
    assert not check({"n": 1.0})  # strict integers
    assert not check({"n": True}) and not check({"n": 0}) and not check({})
    assert not check({"n": 1, "x": True})  # `true` is not `1`
    assert not check({"n": 1, "c": 1}) and not check({"n": 1, "m": 2}) and not check({"n": 1, "other": 3})
    assert check([]) is False  # a list is not an object
    choice = compile_check({"if": {"properties": {"t": {"const": "a"}}}, "then": {"required": ["a"]},
                            "else": {"required": ["b"]}}, {})
    assert choice({"t": "a", "a": 1}) and choice({"t": "b", "b": 1}) and not choice({"t": "a", "b": 1})
    assert not choice({"b": 1})  # no `t`: the `if` holds (`properties` asks only of present keys), so `a` is needed
    assert compile_check({"$ref": REPLAYSPEC + "#/$defs/request"}, {"$id": "https://kvreplay.dev/schema/x.json"},
                         schema_check.documents()) is not None


def test_a_predict_run_of_a_valid_config_never_imports_jsonschema(tmp_path):
    config = ROOT / "examples" / "g1-default-capacity.yaml"
    probe = ("import sys; from kvreplay.cli import main; "
             "code = main(['predict', '-c', sys.argv[1], '--output-dir', sys.argv[2], '--format', 'json']); "
             "print(code, sorted(m for m in ('jsonschema', 'referencing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe, str(config), str(tmp_path / "out")], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip().splitlines()[-1].endswith("0 []")
