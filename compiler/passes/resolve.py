"""Resolve pass: look up the model and each role's hardware in the catalogs (or take them inline).

Runs before the rules so that rules about model families or GPU generations
read resolved records, and so that a misspelt catalog name is reported as such
rather than hidden behind a rule that depends on it.
"""
from __future__ import annotations

from dataclasses import replace

from pyrsistent import freeze

from ..catalog import resolve_hardware, resolve_model
from ..diagnostics import CompileError
from ..spec import Spec, role_pointer


def run(spec: Spec) -> Spec:
    diagnostics = []
    model, problem = resolve_model(spec.get("/engine/model"))
    if problem:
        diagnostics.append(problem)
    hardware = {}
    for role in spec.roles():
        pointer = role_pointer(role, "hardware")
        where = pointer if spec.has(pointer) else "/engine/hardware"
        record, problem = resolve_hardware(spec.get(where), where)
        if problem:
            diagnostics.append(problem)
        hardware[role] = record
    if diagnostics:
        raise CompileError(dict.fromkeys(diagnostics))
    return replace(spec, model=freeze(model), hardware=freeze(hardware))
