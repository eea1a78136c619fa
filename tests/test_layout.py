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
TIER_ATTRIBUTES = {"host", "storage", "kvcr", "chain", "tiers", "top", "prefix_sources", "peer_fetch", "tier"}
MAX_LINES = 300


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
    assert [events.PASS_END, events.FUSED_STORES, events.FUSED_ALLOCATIONS, events.ARRIVAL, events.LEAVE] == [0, 1, 4, 7, 8]
    assert [kind.name for kind in events.EVENTS][:4] == ["pass_end", "fused_stores", "copy_moving", "copy_done"]


# ---- state with one owner: a request's records are written by the modules that own them ------------------

MUTATORS = {"append", "appendleft", "extend", "insert", "remove", "pop", "clear", "update", "setdefault"}
REQUEST_NAMES = {"request", "r", "victim", "job.request", "copy.request", "pull.request"}
OWNERS = {  # record (how a write names it) -> the modules that may write it
    "Request": {"runtime/serving/requests.py", "runtime/serving/scheduler.py", "runtime/serving/pass_results.py",
                # SGLang's scheduler is its own (engines/sglang.py): it owns its requests' progress as vLLM's does
                "runtime/engines/sglang.py", "runtime/engines/sglang_prefill.py", "runtime/engines/sglang_decode.py",
                "runtime/engines/sglang_handoff.py"},
    "TierState (request.tier)": "runtime/tiers/",
    "HandoffState (request.pd)": {"runtime/serving/handoff.py"},
}


def _slots(path: str, name: str) -> set:
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.Assign) and item.targets[0].id == "__slots__":
                    return {e.value for e in item.value.elts}
    raise AssertionError(f"no __slots__ of {name} in {path}")


def _written(tree) -> list[tuple[ast.Attribute, int]]:
    """(attribute node, line) of every attribute assigned, augmented or mutated in place."""
    out = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(t, ast.Attribute):
                    out.append((t, node.lineno))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and isinstance(node.func.value, ast.Attribute):
            out.append((node.func.value, node.lineno))
    return out


def _record_writes(path: Path, fields: dict) -> list[tuple[str, str]]:
    """(record, "file:line: what") of every write of a request record's field in `path`."""
    found = []
    for attribute, line in _written(ast.parse(path.read_text())):
        holder = ast.unparse(attribute.value)
        for record, (names, holders) in fields.items():
            if attribute.attr in names and (holder in holders or any(holder.endswith(h) for h in holders
                                                                      if h.startswith("."))):
                found.append((record, f"{path.relative_to(ROOT)}:{line}: {holder}.{attribute.attr}"))
    return found


def _fields() -> dict:
    return {"Request": (_slots("runtime/serving/requests.py", "Request") - {"tier", "pd"}, REQUEST_NAMES),
            "TierState (request.tier)": (_slots("runtime/tiers/request_state.py", "TierState"), {".tier"}),
            "HandoffState (request.pd)": (_slots("runtime/serving/handoff.py", "HandoffState"), {".pd"})}


def _owned(record: str, path: Path) -> bool:
    owner, relative = OWNERS[record], str(path.relative_to(ROOT))
    return relative.startswith(owner) if isinstance(owner, str) else relative in owner


def test_every_request_record_is_written_by_its_owner_only():
    fields = _fields()
    strays = [where for path in _sources("runtime", "kvreplay") for record, where in _record_writes(path, fields)
              if not _owned(record, path)]
    assert strays == []


def test_the_owner_check_sees_writes(tmp_path):
    """(The check above can fail: a write from another module is found, for each record.)"""
    sample = ROOT / "runtime" / "_sample_for_layout_test.py"
    try:
        sample.write_text("def f(request):\n    request.num_computed = 0\n    request.tier.pins.append(1)\n"
                          "    request.pd.phase = None\n")
        found = _record_writes(sample, _fields())
        assert sorted(record for record, _ in found) == sorted(OWNERS) and not any(_owned(r, sample) for r in OWNERS)
    finally:
        sample.unlink()
