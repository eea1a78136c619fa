"""Static checks over the installed source tree: which modules may import which, and no import cycles.

The module graph is built with `ast` from the package's folders: every import statement counts, also
one inside a function (it runs all the same), except under `if TYPE_CHECKING:` (it never runs).  `FORBIDDEN_IMPORTS` is the table of layering
rules: no module under a prefix may import a module under another.  Add a rule as one more row.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import kvreplay
import kvreplay.compiler
import kvreplay.grammar
import kvreplay.runtime
import kvreplay.schema

PACKAGES = (kvreplay, kvreplay.compiler, kvreplay.runtime, kvreplay.grammar, kvreplay.schema)

# (importer prefix, imported prefix, why it is forbidden)
FORBIDDEN_IMPORTS = (
    ("kvreplay.runtime", "kvreplay.compiler", "the runtime reads the finished plan; it never asks the compiler"),
)


def _module_name(package, path: Path) -> str:
    parts = list(path.relative_to(Path(package.__file__).parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package.__name__, *parts])


@lru_cache(maxsize=1)
def source_files() -> dict[str, Path]:
    """Module name -> file, for every module of the packages (a subpackage of another is found once)."""
    files = {}
    for package in PACKAGES:
        for path in sorted(Path(package.__file__).parent.rglob("*.py")):
            files.setdefault(_module_name(package, path), path)
    return files


def _imported(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """Absolute names an import statement of `module` refers to (for `from X import y`, X and X.y)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")
        base = base[:len(base) - node.level + (1 if is_package else 0)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def _executed_imports(tree: ast.AST):
    """Every import statement of a module, at any depth, but not inside `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _executed_imports(ast.Module([child], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _executed_imports(node)


@lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """Module -> the kvreplay modules it imports (names that are not modules of the tree are dropped)."""
    files = source_files()
    graph = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets = set()
        for node in _executed_imports(tree):
            targets.update(name for name in _imported(module, is_package, node) if name in files)
        targets.discard(module)
        graph[module] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search, colouring the modules)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_the_tree_is_found():
    files = source_files()
    assert "kvreplay.runtime.build" in files and "kvreplay.compiler.pipeline" in files
    assert import_graph()["kvreplay.compiler.pipeline"]


def test_forbidden_imports():
    broken = [f"{module} imports {target}: {why}"
              for module, targets in sorted(import_graph().items())
              for importer, imported, why in FORBIDDEN_IMPORTS if module.startswith(importer)
              for target in sorted(targets) if target == imported or target.startswith(imported + ".")]
    assert not broken, "\n".join(broken)


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
