"""IBM opal JSON config front-end: check the opal document, then lower it to the canonical Spec.

    opal document
      -> schema/opal.schema.json (every key opal knows; "did you mean" for the rest; finite ranges)
      -> opal's defaults (`defaults`), with their provenance
      -> the model: <config_dir>/<name>/config.json read and measured (`hf_model`, `formulas`)
      -> the OPAL-* rules of compiler/rules/opal.py, all at once, on the opal document's own pointers
      -> lowering (`lowering`): the canonical Spec in the predict shape plus an `opal` section,
         `frontend = "opal"`; the validate pass checks it against `schemas.lowered_schema()`

The stage files (`trace`, `otel`) are read by the traces pass and the `OpalPlan` record is built by
the finish pass (compiler/passes/opal_stages.py, opal_finish.py).
"""
from __future__ import annotations

from pathlib import Path

from pyrsistent import freeze, pmap, thaw

from ...diagnostics import CompileError, Diagnostic
from ...load import Loaded
from ...schema_check import errors_of
from ...spec import Spec
from ..replayspec import LoweredSpans
from . import defaults, hf_model, lowering, schemas

KIND = "opal"


def detect(document: dict) -> bool:
    """An opal config: `worker.vllm_params`, and no predict `engine` (its other top-level keys are opal's six
    sections; a misspelt one is the schema's "did you mean", not another format)."""
    worker = document.get("worker")
    return isinstance(worker, dict) and "vllm_params" in worker and "engine" not in document


def _stop(diagnostics) -> None:
    diagnostics = list(diagnostics)
    if diagnostics:
        raise CompileError(diagnostics)


def lower(loaded: Loaded, source: str, base_dir: Path | None = None) -> Spec:
    from ...rules.opal import RULES  # (the rules import this package's formulas)

    document = loaded.document
    _stop(schemas.source_errors(document))
    filled, origin = defaults.apply(document)
    params = filled["model"]["model_params"]
    base = Path(source).resolve().parent if base_dir is None else base_dir
    model = hf_model.read(params["config_dir"], params["name"], base)
    written = Spec(doc=freeze(filled), source=source, frontend=KIND, origin=pmap(origin), spans=loaded.spans,
                   model=freeze(model))
    _stop(d for rule in RULES for d in rule.diagnostics(written))
    doc, lowered_origin, aliases = lowering.lower_document(filled, origin, model, document)
    return Spec(doc=doc, source=source, frontend=KIND, origin=pmap(lowered_origin),
                spans=LoweredSpans(loaded.spans, aliases))


def lowered_schema_errors(spec: Spec) -> list[Diagnostic]:
    """The validate pass for this front-end: the lowered document against `schemas.lowered_schema()`."""
    return errors_of(schemas.lowered_validator(), thaw(spec.doc))
