"""Huge, long and deep YAML (issue 19, item 5): each refused with its own code, in seconds and little memory.

The bounds are compiler/yaml_bounds.py's: 2 MiB of YAML, 10,000 nodes as written, 100 levels.  The big
files are made here; the slow case (a 60 MB file) runs the CLI in a child process that reports its own peak
memory, the others load in-process.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import pytest

from kvreplay.compiler import load, yaml_bounds
from kvreplay.compiler.diagnostics import CompileError
from kvreplay.compiler.spans import Span
from kvreplay.report import _quote, format_diagnostic, source_line

SECONDS = 5.0
# (the peak of this process's own memory: VmHWM starts anew at exec, while ru_maxrss keeps the forked parent's)
CHILD = """import re, sys
from kvreplay.cli import main
code = main(["validate", sys.argv[1]])
peak = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
print("peak-kb", peak, file=sys.stderr)
sys.exit(code)
"""


def refused(data: bytes, name: str = "c.yaml"):
    start = time.perf_counter()
    with pytest.raises(CompileError) as info:
        load.load_bytes(data, name)
    assert time.perf_counter() - start < SECONDS
    (diagnostic,) = info.value.diagnostics
    return diagnostic


def test_a_60_mb_comment_only_yaml_is_refused_unparsed(tmp_path):
    """Was 20 s and 609 MB of parsing; now LOAD-SIZE after reading the first 2 MiB only."""
    path = tmp_path / "comments.yaml"
    path.write_bytes(("#" + "x" * 78 + "\n").encode() * (60 * 1024 * 1024 // 80))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=60)
    wall = time.perf_counter() - start
    assert done.returncode == 1, done.stderr
    assert "error[LOAD-SIZE] the YAML file is 2,097,153 bytes, more than the 2,097,152-byte limit" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    peak_kb = int(done.stderr.split("peak-kb")[1].split()[0])
    assert wall < SECONDS and peak_kb < 200_000, (wall, peak_kb)


def test_a_million_item_list_is_refused_by_size_not_as_an_alias_bomb():
    d = refused(b"engine:\n  x:\n" + b"  - 1\n" * 1_000_000)
    assert d.code == "LOAD-SIZE" and "6,000,013 bytes" in d.message


def test_too_many_nodes_under_the_size_limit_are_counted_while_parsing():
    """20,000 items in 120 kB: refused at the 10,001st node, where it is, with a hint that says what to do."""
    data = b"engine:\n  model: m\n  x:\n" + b"  - 1\n" * 20_000
    d = refused(data)
    assert d.code == "YAML-TOO-MANY-NODES" and "more than 10,000" in d.message
    # the document, `engine`, its mapping, `model`, `m`, `x`, the list: the 10,001st node is item 9,994, on line 3 + 9,994
    assert d.span == Span(3 + 9_994, 5)
    assert "trace file" in d.hint and "JSON" in d.hint


def test_nodes_up_to_the_limit_load(monkeypatch):
    monkeypatch.setattr(yaml_bounds, "MAX_YAML_NODES", 8)  # {engine: {model: m, x: [1]}}: 4 keys and values, 4 more
    assert load.load_bytes(b"engine:\n  model: m\n  x: [1]\n", "c.yaml").document == {"engine": {"model": "m",
                                                                                                  "x": [1]}}
    assert refused(b"engine:\n  model: m\n  x: [1, 2]\n").code == "YAML-TOO-MANY-NODES"


def test_aliases_count_once_as_written_and_the_bomb_is_still_an_alias_bound():
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    assert refused("\n".join(lines).encode()).code == "YAML-ALIAS-BOUND"


def test_ten_thousand_open_brackets_are_refused_before_the_scanner_looks_ahead():
    """Was 6.6 s in the parser's look-ahead; the 101st `[` is refused at its column."""
    d = refused(b"engine: " + b"[" * 10_000 + b"]" * 10_000 + b"\n")
    assert (d.code, d.span) == ("YAML-TOO-DEEP", Span(1, 109))


def test_deep_block_nesting_is_refused_by_the_composer():
    data = "".join(" " * i + f"k{i}:\n" for i in range(150)).encode()
    d = refused(data)
    assert (d.code, d.span) == ("YAML-TOO-DEEP", Span(101, 101))  # k0 is in the 1st mapping, k100 in the 101st


def test_a_hundred_levels_are_fine():
    data = b"engine: " + b"[" * 99 + b"1" + b"]" * 99 + b"\n"
    document = load.load_bytes(data, "c.yaml").document
    depth, node = 0, document["engine"]
    while isinstance(node, list):
        depth, node = depth + 1, node[0]
    assert (depth, node) == (99, 1)


def test_json_keeps_the_larger_limit():
    """A ReplaySpec with its token ids is large JSON: the YAML bounds do not apply to it."""
    document = {"version": 1, "requests": [{"id": str(i), "input_token_ids": list(range(100))} for i in range(5_000)]}
    data = json.dumps(document).encode()
    assert len(data) > yaml_bounds.MAX_YAML_BYTES
    assert len(load.load_bytes(data, "spec.json").document["requests"]) == 5_000


def test_a_quoted_long_line_is_cut_around_the_caret(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text("engine: [" + "1, " * 20_000 + "]\n")
    d = refused(path.read_bytes())
    d = dataclasses.replace(d, source=str(path))
    text, caret = format_diagnostic(d).splitlines()[1:3]
    assert len(text) < 200 and text.startswith("    ...") and text.endswith("...")
    assert text[caret.index("^")] == "1"  # (the 10,001st item)
    assert _quote("abc", 2) == ("abc", 2)
    assert source_line(str(path), 1).startswith("engine: [1, 1") and source_line(str(path), 2) is None


def test_a_json_config_with_a_huge_list_is_located_in_seconds():
    """Found by the fuzz run (issue 19, item 5): the position of a diagnostic in a JSON file came from a parse
    tree of the whole file, 2 minutes for a 1M-item list under an unknown key; now one pass over its tokens."""
    import orjson

    from kvreplay.compiler.pipeline import compile_bytes

    head = b'{"engine": {"model": "Qwen/Qwen3-8B", "hardware": "h100_sxm"}, "traffic": {"stop": {"requests": 4}},\n'
    data = head + b' "extra": ' + orjson.dumps(list(range(500_000))) + b"}"
    start = time.process_time()
    (d,) = compile_bytes(data, "big.json").diagnostics
    assert time.process_time() - start < 8  # (CPU seconds: the machine's load stretches wall time)
    assert (d.code, d.pointer, d.span) == ("SCHEMA-UNKNOWN-KEY", "/extra", Span(2, 2))
