"""Rules pass: evaluate every rule of one stage, all at once; errors stop the pipeline.

The rules themselves are data (`compiler.rules`); this pass only runs them.
`spec` rules run after defaults, `geometry` rules after sizes are inferred.
"""
from __future__ import annotations

from ..diagnostics import CompileError
from ..rules import all_rules
from ..spec import Spec


def check(spec: Spec, stage: str) -> list:
    fired = {rule.id: list(rule.diagnostics(spec)) for rule in all_rules() if rule.stage == stage}
    replaced = {old for rule in all_rules() if fired.get(rule.id) for old in rule.supersedes}
    return [d for rule_id, diagnostics in fired.items() if rule_id not in replaced for d in diagnostics]


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
