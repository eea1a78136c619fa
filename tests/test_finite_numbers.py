"""Numbers no deployment could mean end in diagnostics: NaN, infinities, integers of 2^64 and more.

Every numeric field of both schemas has a finite range; the loader refuses
non-finite values; a property test puts extreme values into the examples'
numeric fields and asserts that compiling ends in a plan (that serialises) or in
located diagnostics, never an exception; the CLI prints one located line each.
"""
from __future__ import annotations

import copy
import io
import json
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from kvreplay.cli import main
from kvreplay.compiler.load import load_bytes
from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.schema import OPAL, PREDICT, REPLAYSPEC, load_schema

from .support import EXAMPLES
from .fuzz import paths

# A few hundred in the suite (~1 s); KVREPLAY_FUZZ_EXAMPLES=4000 for a longer search
FUZZ_EXAMPLES = int(os.environ.get("KVREPLAY_FUZZ_EXAMPLES", "300"))
# Bounded by rules instead (REPLAYSPEC-TIME: finite and >= 0; REPLAYSPEC-TIME-LIMIT: at most a year)
BY_RULE = {"arrival_time_ms", "max_sim_time_ms", "startup_delay_ms", "handoff_latency_ms"}
EXTREMES = [math.nan, math.inf, -math.inf, 2**64, 10**24, -1, 0, 2**63, -(2**64), 1e300, 2**40, 2**31, 0.5,
            # the schema's own limits, which several fields at once must survive too
            2**40 - 1, 2**31 - 1, 2**16 - 1, 2**20, 2**50, 1_000_000, 86_400_000]


def numeric_schemas(node, path=()):
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from numeric_schemas(item, path + (str(i),))
    elif isinstance(node, dict):
        kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if {"integer", "number"} & {k for k in kinds if isinstance(k, str)}:
            yield "/".join(path), node
        for key, value in node.items():
            yield from numeric_schemas(value, path + (key,))


@pytest.mark.parametrize("name", [PREDICT, REPLAYSPEC, OPAL])
def test_every_numeric_field_has_a_finite_range(name):
    unbounded = [path for path, node in numeric_schemas(load_schema(name))
                 if path.rsplit("/", 1)[-1] not in BY_RULE
                 and not ({"minimum", "exclusiveMinimum"} & set(node) and {"maximum", "exclusiveMaximum"} & set(node))]
    assert not unbounded


BASES = [(p, load_bytes(p.read_bytes(), p.name).document)
         for p in sorted(EXAMPLES.glob("*.yaml")) + sorted((EXAMPLES / "opal").glob("*.json"))]


def numeric_leaves(node):
    """The paths (fuzz.paths) of every number in `node`, booleans aside."""
    for path in paths(node):
        value = node
        for step in path:
            value = value[step]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            yield path


def as_yaml(document) -> bytes:
    stream = io.StringIO()
    YAML(typ="safe", pure=True).dump(document, stream)
    return stream.getvalue().encode()


def as_set(path, value) -> str:
    dotted = "".join(f"[{p}]" if isinstance(p, int) else ("." if i else "") + p for i, p in enumerate(path))
    text = "1e999" if value == math.inf else "-1e999" if value == -math.inf else ".nan" if value != value else value
    return f"{dotted}={text}"


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_extreme_numbers_end_in_a_plan_or_diagnostics(data):
    path, base = data.draw(st.sampled_from(BASES))
    leaves = list(numeric_leaves(base))
    document, overrides = copy.deepcopy(base), []
    for _ in range(data.draw(st.integers(1, 3))):
        leaf, value = data.draw(st.sampled_from(leaves)), data.draw(st.sampled_from(EXTREMES))
        if data.draw(st.booleans()):
            overrides.append(as_set(leaf, value))
            continue
        parent = document
        for part in leaf[:-1]:
            parent = parent[part]
        parent[leaf[-1]] = value
    syntax = data.draw(st.sampled_from(["yaml", "json"]))
    # json.dumps writes NaN / Infinity as Python reads them (not JSON: the loader refuses them)
    text = as_yaml(document) if syntax == "yaml" else json.dumps(document).encode()
    result = compile_bytes(text, f"mutated.{syntax}", overrides, base_dir=path.parent)
    assert result.ok or result.diagnostics
    if result.ok:
        result.plan.canonical_json()  # a plan that cannot be written is a crash too (ints past 64 bits)
    for diagnostic in result.diagnostics:
        assert diagnostic.code and diagnostic.message and diagnostic.span is not None, diagnostic


BAD = {
    "nan": ("d2h_bandwidth_gbps: 32.0", "d2h_bandwidth_gbps: .nan", "LOAD-NONFINITE"),
    "infinity": ("h2d_bandwidth_gbps: 32.0", "h2d_bandwidth_gbps: -.inf", "LOAD-NONFINITE"),
    "huge-integer": ("blocks: 2499", "blocks: 18446744073709551616", "SCHEMA-RANGE"),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("command", ["validate", "compile", "predict"])
def test_cli_prints_one_located_diagnostic(tmp_path, capsys, case, command):
    old, new, code = BAD[case]
    source = (EXAMPLES / "host-offload-prediction.yaml").read_text()
    assert old in source
    path = tmp_path / "bad.yaml"
    path.write_text(source.replace(old, new))
    argv = {"validate": ["validate", str(path)], "compile": ["compile", str(path), "-o", str(tmp_path / "p.json")],
            "predict": ["predict", "--no-progress", "-c", str(path), "--output-dir", str(tmp_path / "out")]}[command]
    exit_code = main(argv)
    out, err = capsys.readouterr()
    assert exit_code == (2 if command == "predict" else 1)  # predict: a config error is a usage error
    errors = [line for line in (out + err).splitlines() if f"error[{code}]" in line]
    assert len(errors) == 1 and errors[0].startswith(f"{path}:")
    assert "Traceback" not in out + err
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "out").exists()


def test_set_of_a_huge_integer_is_one_located_diagnostic(capsys):
    path = EXAMPLES / "host-offload-prediction.yaml"
    exit_code = main(["validate", str(path), "--set",
                      "engine.workers.aggregated.scheduler.max_sequences=1000000000000000000000000"])
    out, err = capsys.readouterr()
    assert exit_code == 1 and "Traceback" not in out + err
    (line,) = [line for line in (out + err).splitlines() if "error[" in line]
    assert line.startswith("--set #1:1:51: error[SCHEMA-RANGE]") and "at most 1048576 (2^20)" in line
