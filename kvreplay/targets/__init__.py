"""Compile a config for another tool: one module per target, one "what did not carry over" ledger (`carry`).

`TARGETS` maps each `kvreplay compile --to` name to its module's `emit(result, carry, output)`, which
returns the files to write (`{path or None: bytes}`, None meaning stdout).  `run` writes them and reports
what did not carry over: warnings on stderr, or errors (and no files) under `--strict`.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

from .. import report
from ..compiler.diagnostics import locate
from ..whole_file import write_whole
from .carry import Carry, Refusal

TARGETS = ("aisimulate-native", "opal", "predict", "dynamo-mocker")
EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def _module(name: str):
    return importlib.import_module("." + name.replace("-", "_"), __package__)


def compile_to(result, target: str, output: str | None):
    """(files to write, located diagnostics of what did not carry over); raises `Refusal`."""
    module = _module(target)
    if result.spec.frontend not in module.FRONTENDS:
        article = "an" if result.spec.frontend[0] in "aeiou" else "a"
        raise Refusal(f"{result.source} is {article} {result.spec.frontend} config; --to {target} reads "
                      + " or ".join(f"{f} configs" for f in module.FRONTENDS))
    carry = Carry(result.spec, module.NAME, getattr(module, "IGNORE", ()))
    files = module.emit(result, carry, None if output is None else Path(output))
    return files, carry


def run(result, target: str, output: str | None, strict: bool) -> int:
    try:
        files, carry = compile_to(result, target, output)
    except Refusal as refusal:
        sys.stderr.write(f"kvreplay: {refusal}\n")
        return EXIT_USAGE
    diagnostics = locate(carry.diagnostics(strict), result.spec.spans, result.source)
    if diagnostics:
        sys.stderr.write(report.dropped_report(diagnostics, carry.target))
    if strict and diagnostics:
        return EXIT_INVALID
    for path, data in files.items():
        if path is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_whole(path, data)
        except OSError as error:
            sys.stderr.write(f"kvreplay: cannot write {path}: {error.strerror or error}\n")
            return EXIT_INVALID
    return EXIT_OK
