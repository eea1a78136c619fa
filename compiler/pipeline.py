"""The compiler as an ordered tuple of passes, and the one result object it returns.

    load -> units -> overrides -> frontend -> validate -> defaults -> resolve -> rules(spec)
         -> geometry -> rules(geometry) -> traces -> plan (canonical data + finished records)

Every pass after the front-end is `Spec -> Spec`; `PASSES` is a plain tuple so
a test can run any prefix of it.  The traces stage reads the files the config
names (relative to the config's folder) and hands their rows to the plan.  Diagnostics of the first failing stage are
returned together, located and sorted; no exception escapes for bad input.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from . import config_units
from .diagnostics import CompileError, Diagnostic, locate
from .load import load_bytes, read_bounded, size_limit
from .passes import defaults, frontend, geometry, opal_stages, plan, resolve, rules, traces, validate
from .passes.plan import Plan
from .spec import Spec

PASSES: tuple[tuple[str, Callable[[Spec], Spec]], ...] = (
    ("validate", validate.run),
    ("defaults", defaults.run),
    ("resolve", resolve.run),
    ("rules", rules.run_spec_rules),
    ("geometry", geometry.run),
    ("rules-geometry", rules.run_geometry_rules),
)


@dataclass(frozen=True)
class CompileResult:
    source: str
    plan: Plan | None = None
    spec: Spec | None = None
    diagnostics: tuple[Diagnostic, ...] = field(default_factory=tuple)
    stage: str = ""  # the stage that failed, if any
    document: dict | None = field(default=None, compare=False)  # the input as written, after --set

    @property
    def ok(self) -> bool:
        return self.plan is not None and not self.diagnostics


def run_passes(spec: Spec, passes=PASSES) -> Spec:
    for _, step in passes:
        spec = step(spec)
    return spec


def compile_bytes(data: bytes, source: str = "<input>", overrides: Sequence[str] = (),
                  base_dir: Path | None = None) -> CompileResult:
    """Compile one config; files it names are read relative to `base_dir` (default: the folder of `source`)."""
    stage, spans, spec = "load", None, None
    try:
        loaded = load_bytes(data, source)
        spans = loaded.spans
        units_of = isinstance(loaded.document, dict) and config_units.schema_for(frontend.detect(loaded.document))
        if units_of:  # `bytes: 80GiB` in the file itself, read as `--set` reads it
            loaded = type(loaded)(config_units.with_units(loaded.document, units_of), spans, loaded.syntax)
        if overrides:
            from .overrides import apply_overrides  # lark is loaded only when needed

            stage = "overrides"
            document, spans = apply_overrides(loaded.document, loaded.spans, overrides)
            loaded = type(loaded)(document, spans, loaded.syntax)
        stage = "frontend"
        base = Path(source).resolve().parent if base_dir is None else base_dir
        spec = frontend.run(loaded, source, base)
        if spec.frontend == "opal":  # the lowered Spec's pointers (`/engine/...`, `/opal/...`) at their opal source
            spans = spec.spans
        for stage, step in PASSES:
            spec = step(spec)
        stage = "traces"
        rows = (opal_stages if spec.frontend == "opal" else traces).run(spec, base)  # (an opal config: its stages)
        stage = "plan"
        return CompileResult(source, plan=plan.run(spec, rows), spec=spec, document=loaded.document)
    except CompileError as error:
        return CompileResult(source, spec=spec, diagnostics=locate(error.diagnostics, spans, source), stage=stage)
    except RecursionError:
        diagnostic = Diagnostic("LOAD-DEPTH", "", "the document is nested too deeply", "flatten the document")
        return CompileResult(source, diagnostics=locate([diagnostic], spans, source), stage=stage)


def compile_file(path: str | Path, overrides: Sequence[str] = ()) -> CompileResult:
    path = Path(path)
    try:
        data = read_bounded(path, size_limit(path))
    except OSError as error:
        diagnostic = Diagnostic("LOAD-FILE", "", f"cannot read the file: {error.strerror or error}",
                                "check the path and permissions")
        return CompileResult(str(path), diagnostics=locate([diagnostic], None, str(path)), stage="load")
    return compile_bytes(data, str(path), overrides)
