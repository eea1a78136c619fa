"""Rules pass: evaluate every rule of one stage, all at once; errors stop the pipeline.

The rules themselves are data (`compiler.rules`); this pass only runs them.
`spec` rules run after defaults, `geometry` rules after sizes are inferred.
"""
from __future__ import annotations

from ..diagnostics import CompileError
from ..rules import all_rules
from ..spec import Spec


def _scope(pointer: str) -> str:
    """The worker role a pointer is under (`/engine/workers/<role>`), else the whole config."""
    parts = pointer.split("/")
    return "/".join(parts[:4]) if pointer.startswith("/engine/workers/") else ""


def check(spec: Spec, stage: str) -> list:
    fired = {rule.id: list(rule.diagnostics(spec)) for rule in all_rules() if rule.stage == stage}
    # a more specific rule replaces the ones it supersedes where both fire for the same role
    replaced = {(old, _scope(d.pointer)) for rule in all_rules() for d in fired.get(rule.id, ())
                for old in rule.supersedes}
    return [d for rule_id, diagnostics in fired.items() for d in diagnostics
            if (rule_id, _scope(d.pointer)) not in replaced and (rule_id, "") not in replaced]


def _run(stage: str):
    def run(spec: Spec) -> Spec:
        diagnostics = check(spec, stage)
        if diagnostics:
            raise CompileError(diagnostics)
        return spec
    run.__name__ = f"rules_{stage}"
    return run


run_spec_rules = _run("spec")
run_geometry_rules = _run("geometry")
