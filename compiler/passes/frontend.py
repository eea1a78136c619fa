"""Front-end pass: recognise the input language and produce the canonical Spec.

Predict YAML is already in the canonical (predict) shape.  A native ReplaySpec
(`version` + `requests`/`topology`) is checked and lowered by
`compiler.frontends.replayspec`.  An opal JSON config (`worker.vllm_params`) is
recognised so that it gets a precise message until its front-end exists.
"""
from __future__ import annotations

from pyrsistent import freeze

from .. import frontends
from ..diagnostics import CompileError, Diagnostic
from ..load import Loaded
from ..spec import Spec


def detect(document: dict) -> str:
    if "version" in document and ("requests" in document or "topology" in document):
        return "replayspec"
    if "worker" in document and isinstance(document["worker"], dict) and "vllm_params" in document["worker"]:
        return "opal"
    return "predict"


def run(loaded: Loaded, source: str) -> Spec:
    kind = detect(loaded.document)
    if kind in frontends.FRONTENDS:
        return frontends.lower(kind, loaded, source)
    if kind != "predict":
        names = {"opal": "opal JSON config"}
        raise CompileError([Diagnostic("FRONTEND-UNSUPPORTED", "", f"this is a {names[kind]}; this version of "
                                       "kvreplay reads predict YAML and native ReplaySpec JSON only",
                                       "convert it to a predict YAML config (see examples/)")])
    return Spec(doc=freeze(loaded.document), source=source, frontend=kind, spans=loaded.spans)
