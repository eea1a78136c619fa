"""The runtime's structure (issue 11): tiers are asked, not tested for; one event table; small modules; a README
layout table that matches the tree."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.pipeline import compile_file
from kvreplay.runtime.build import build
from kvreplay.runtime.shell import events

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("compiler", "runtime", "kvreplay", "grammar", "schema")
# what names a rank's tiers, or one of them: only runtime/tiers/ may test whether it is there
TIER_ATTRIBUTES = {"host", "storage", "kvcr", "chain", "tiers", "top", "fills", "peer_fetch", "tier"}
MAX_LINES = 310


def _sources(*folders: str):
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _none_tests_of_tiers(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            continue
        if not any(isinstance(c, ast.Constant) and c.value is None for c in [node.left, *node.comparators]):
            continue
        for side in [node.left, *node.comparators]:
            name = side.attr if isinstance(side, ast.Attribute) else side.id if isinstance(side, ast.Name) else ""
            if name in TIER_ATTRIBUTES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: `{ast.unparse(node)}`")
    return found


def test_no_module_outside_tiers_tests_whether_a_tier_is_there():
    found = [hit for path in _sources("runtime", "kvreplay") if "tiers" not in path.relative_to(ROOT).parts
             for hit in _none_tests_of_tiers(path)]
    assert found == []


def test_the_check_finds_such_a_test(tmp_path):
    """(The check above can fail: it finds the pattern it forbids.)"""
    sample = ROOT / "runtime" / "_sample_for_layout_test.py"
    try:
        sample.write_text("def f(rank):\n    return rank.host is not None or rank.chain.kvcr is None\n")
        assert len(_none_tests_of_tiers(sample)) == 2
    finally:
        sample.unlink()


def test_modules_are_small():
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path in _sources(*PACKAGES)
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert long == []


def test_every_module_says_its_job():
    missing = [str(path.relative_to(ROOT)) for path in _sources("runtime", "compiler")
               if path.read_text().strip() and ast.get_docstring(ast.parse(path.read_text())) is None
               and path.name != "__init__.py"]
    assert missing == []


def test_the_readme_layout_table_names_every_runtime_folder():
    readme = (ROOT / "README.md").read_text()
    table = "\n".join(line for line in readme.splitlines() if line.startswith("| `"))
    folders = sorted(p.name for p in (ROOT / "runtime").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert [f for f in folders if f"`runtime/{f}/`" not in table] == []
    named = set(re.findall(r"`runtime/([a-z_]+)/`", table))
    assert named <= set(folders), "the table names a folder that does not exist"


def test_one_event_table_every_kind_handled():
    """Every kind in events.EVENTS has a handler on a built replay (P/D, G2 and KVCR included), and kind numbers
    are the table's positions, so the queue order is the table's order."""
    for example in ("disaggregated-pd.yaml", "kvcr-peer-fetch.yaml", "scaled-workers.yaml"):
        plan = finish_plan(compile_file(ROOT / "examples" / example).plan.to_dict(), ROOT / "examples")
        handlers = events.handlers(build(plan))
        assert len(handlers) == len(events.EVENTS) and all(callable(h) for h in handlers)
    assert [events.PASS_END, events.ARRIVAL, events.LEAVE] == [0, 5, 6]
    assert [kind.name for kind in events.EVENTS][:3] == ["pass_end", "copy_moving", "copy_done"]
