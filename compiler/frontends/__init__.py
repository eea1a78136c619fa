"""Front-ends other than predict YAML: each lowers its input language to the canonical Spec (predict shape).

A front-end module offers `lower(loaded, source, base_dir) -> Spec` (checks first, with
the source document's positions; files it reads are relative to `base_dir`) and
`lowered_schema_errors(spec)`, which the validate pass calls for Specs of that front-end instead of the predict schema.
"""
from __future__ import annotations

from pathlib import Path

from ..diagnostics import Diagnostic
from ..load import Loaded
from ..spec import Spec
from . import opal, replayspec

FRONTENDS = {replayspec.KIND: replayspec, opal.KIND: opal}


def lower(kind: str, loaded: Loaded, source: str, base_dir: Path | None = None) -> Spec:
    return FRONTENDS[kind].lower(loaded, source, base_dir)


def lowered_schema_errors(spec: Spec) -> list[Diagnostic]:
    return FRONTENDS[spec.frontend].lowered_schema_errors(spec)
