"""Front-ends other than predict YAML: each lowers its input language to the canonical Spec (predict shape).

A front-end module offers `lower(loaded, source) -> Spec` (checks first, with
the source document's positions) and `lowered_schema_errors(spec)`, which the
validate pass calls for Specs of that front-end instead of the predict schema.
"""
from __future__ import annotations

from ..diagnostics import Diagnostic
from ..load import Loaded
from ..spec import Spec
from . import replayspec

FRONTENDS = {replayspec.KIND: replayspec}


def lower(kind: str, loaded: Loaded, source: str) -> Spec:
    return FRONTENDS[kind].lower(loaded, source)


def lowered_schema_errors(spec: Spec) -> list[Diagnostic]:
    return FRONTENDS[spec.frontend].lowered_schema_errors(spec)
