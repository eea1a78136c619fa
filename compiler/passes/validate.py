"""Validate pass: check the document against its JSON Schema, all errors at once.

Predict YAML is checked against the predict schema; a Spec a front-end lowered is checked by that
front-end, which knows the shape it lowers to.  The checking itself is `schema_check`.
"""
from __future__ import annotations

from ..diagnostics import CompileError
from ..frontends import lowered_schema_errors
from ..schema_check import schema_errors
from ..spec import Spec


def run(spec: Spec) -> Spec:
    """Predict YAML against the predict schema; a lowered front-end's Spec against that front-end's schema."""
    if spec.frontend == "predict":
        diagnostics = schema_errors(spec.plain())
    else:
        diagnostics = lowered_schema_errors(spec)
    if diagnostics:
        raise CompileError(diagnostics)
    return spec
