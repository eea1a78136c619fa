"""Front-end pass: recognise the input language and produce the canonical Spec.

Predict YAML is already in the canonical (predict) shape.  A native ReplaySpec
(`version` + `requests`/`topology`) is checked and lowered by
`compiler.frontends.replayspec`, an opal JSON config (`worker.vllm_params`) by
`compiler.frontends.opal`; files a config names are read relative to `base_dir`.
"""
from __future__ import annotations

from pathlib import Path

from pyrsistent import freeze

from .. import frontends
from ..frontends import opal
from ..load import Loaded
from ..spec import Spec


def detect(document: dict) -> str:
    if "version" in document and ("requests" in document or "topology" in document):
        return "replayspec"
    if opal.detect(document):
        return opal.KIND
    return "predict"


def run(loaded: Loaded, source: str, base_dir: Path | None = None) -> Spec:
    kind = detect(loaded.document)
    if kind in frontends.FRONTENDS:
        return frontends.lower(kind, loaded, source, base_dir)
    return Spec(doc=freeze(loaded.document), source=source, frontend=kind, spans=loaded.spans)
