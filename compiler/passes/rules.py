"""Rules pass: evaluate every rule of one stage, all at once; errors stop the pipeline.

The rules themselves are data (`compiler.rules`); this pass only runs them.
`spec` rules run after defaults, `geometry` rules after sizes are inferred.
"""
from __future__ import annotations

from ..diagnostics import CompileError
from ..rules import all_rules
from ..spec import Spec


def check(spec: Spec, stage: str) -> list:
    return [d for rule in all_rules() if rule.stage == stage for d in rule.diagnostics(spec)]


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
