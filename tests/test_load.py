"""Load pass: positions for every pointer, and every refusal with its position."""
from __future__ import annotations

import pytest

from kvreplay.compiler import load
from kvreplay.compiler.diagnostics import CompileError
from kvreplay.compiler.spans import Span


def refused(data: bytes, name: str = "x.yaml"):
    with pytest.raises(CompileError) as info:
        load.load_bytes(data, name)
    (diagnostic,) = info.value.diagnostics
    return diagnostic


def test_yaml_values_and_positions():
    loaded = load.load_bytes(b"engine:\n  model: m\n  list: [1, 2.5, x]\n  flag: true\n", "c.yaml")
    assert loaded.document == {"engine": {"model": "m", "list": [1, 2.5, "x"], "flag": True}}
    assert loaded.spans.value("/engine/model") == Span(2, 10)
    assert loaded.spans.key("/engine/model") == Span(2, 3)
    assert loaded.spans.value("/engine/list/2") == Span(3, 18)
    # a pointer that was never written resolves to its nearest written ancestor
    assert loaded.spans.find("/engine/missing/deeper") == Span(2, 3)


def test_yaml_1_2_scalars_stay_strings():
    loaded = load.load_bytes(b"a: yes\nb: '16'\nc: 0x10\nd: ~\n", "c.yaml")
    assert loaded.document == {"a": "yes", "b": "16", "c": 16, "d": None}


def test_merge_keys_expand_with_explicit_keys_winning():
    loaded = load.load_bytes(b"base: &b {x: 1, y: 1}\nuse:\n  <<: *b\n  y: 2\n", "c.yaml")
    assert loaded.document["use"] == {"x": 1, "y": 2}


def test_yaml_syntax_error_has_line_and_column():
    d = refused(b"engine:\n  model: [a, b\n")
    assert d.code == "YAML-SYNTAX" and d.span.line == 3


def test_duplicate_key_points_at_the_second_and_names_the_first():
    d = refused(b"engine:\n  model: a\n  model: b\n")
    assert d.code == "YAML-DUPLICATE-KEY"
    assert d.span == Span(3, 3) and "line 2" in d.message and d.pointer == "/engine/model"


def test_billion_laughs_is_refused_quickly():
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
    d = refused("\n".join(lines).encode())
    assert d.code == "YAML-ALIAS-BOUND"


def test_size_bound(monkeypatch):
    monkeypatch.setattr(load, "MAX_BYTES", 10)
    assert refused(b"engine: {model: abc}\n").code == "LOAD-SIZE"


def test_non_utf8_names_the_byte_and_position():
    d = refused(b"engine:\n  model: \xff\n")
    assert d.code == "LOAD-ENCODING" and d.span == Span(2, 10) and "0xff" in d.message


@pytest.mark.parametrize("data,code", [(b"", "LOAD-EMPTY"), (b"# only a comment\n", "LOAD-EMPTY"),
                                       (b"- 1\n- 2\n", "LOAD-NOT-MAPPING"), (b"just text\n", "LOAD-NOT-MAPPING"),
                                       (b"a: 1\n---\nb: 2\n", "YAML-MULTI-DOC"), (b"1: x\n", "YAML-KEY-TYPE")])
def test_refused_documents(data, code):
    assert refused(data).code == code


def test_json_positions_are_computed_on_demand():
    loaded = load.load_bytes(b'{\n  "engine": {"model": "m",\n    "list": [1, 2]}\n}', "c.json")
    assert loaded.syntax == "json"
    assert loaded.spans.value("/engine/list/1") == Span(3, 17)
    assert loaded.spans.key("/engine/model") == Span(2, 14)


def test_json_errors():
    assert refused(b'{"a": 1,}', "c.json").code == "JSON-SYNTAX"
    d = refused(b'{"a": 1,\n "a": 2}', "c.json")
    assert d.code == "JSON-DUPLICATE-KEY" and d.span == Span(2, 2)
    assert refused(b'{"a": NaN}', "c.json").code == "JSON-SYNTAX"


def test_syntax_detection_without_extension():
    assert load.load_bytes(b'{"a": 1}', "config").syntax == "json"
    assert load.load_bytes(b"a: 1\n", "config").syntax == "yaml"
