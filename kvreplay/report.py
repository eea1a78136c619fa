"""Reporters: turn compile results into text for people or JSON for tools.

The text form is ``file:line:col: error[CODE] dotted.path: message`` followed
by the offending source line with a caret, a ``note:`` line (with its own
caret) for each secondary place (the other half of a conflict, where a bracket
was opened), a ``note:`` saying where the config names the file when the
diagnostic is in another file (a trace), a ``hint:`` line, and for a rule a
``spec:`` line naming its spec section.  Positions come from the diagnostics
(the compiler located them); reporters only format.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable

import orjson

from .compiler.diagnostics import Diagnostic
from .compiler.load import read_bounded, size_limit
from .compiler.pipeline import CompileResult

QUOTE_WIDTH = 160  # characters of a long source line quoted around the caret


@lru_cache(maxsize=8)
def _source(path: str) -> bytes:
    try:
        return read_bounded(path, size_limit(path))  # (a source quoted from is never read past the loader's limit)
    except OSError:
        return b""


def source_line(path: str, line: int) -> str | None:
    """Line `line` (1-based) of the file at `path`, or None; only the lines up to it are split off (a diagnostic
    about the first line of a 60 MB file must not decode all of it)."""
    data, start = _source(path), 0
    for _ in range(line - 1):
        start = data.find(b"\n", start) + 1
        if start == 0:
            return None
    if line < 1 or start >= len(data):
        return None
    end = data.find(b"\n", start)
    return data[start:end if end >= 0 else len(data)].rstrip(b"\r").decode("utf-8", errors="replace")


def _quote(text: str, col: int, width: int = QUOTE_WIDTH) -> tuple[str, int]:
    """`text` cut to about `width` characters around column `col` (1-based), and the caret's column in the cut."""
    if len(text) <= width:
        return text, col
    start = max(0, min(col - 1 - width // 2, len(text) - width))
    cut = text[start:start + width]
    prefix = "..." if start else ""
    return prefix + cut + ("..." if start + width < len(text) else ""), col - start + len(prefix)


def _position(d: Diagnostic) -> str:
    span = d.span
    return f"{d.source}:{span.line}:{span.col}" if span and span.line else d.source


def format_diagnostic(d: Diagnostic, context: bool = True) -> str:
    path = f" {d.dotted}:" if d.pointer else ""
    lines = [f"{_position(d)}: {d.severity}[{d.code}]{path} {d.message}"]
    if context and d.span and d.span.line and not d.span.source:
        text = source_line(d.source, d.span.line)
        if text is not None:
            text, col = _quote(text, d.span.col)
            lines.append(f"    {text}")
            lines.append("    " + " " * (col - 1) + "^")
    for label, span in d.labels:  # (secondary places: where a bracket was opened, the other half of a conflict)
        lines.append(f"  note: {label}: {span.source or d.source}:{span}")
        text = source_line(d.source, span.line) if context and not span.source else None
        if text is not None:
            text, col = _quote(text, span.col)
            lines.extend([f"    {text}", "    " + " " * (col - 1) + "^"])
    if d.named_by is not None:
        lines.append(f"  note: named by {_position(d.named_by)}: {d.named_by.dotted}")
    if d.hint:
        lines.append(f"  hint: {d.hint}")
    if d.section:
        document, _, heading = d.section.partition(": ")
        lines.append(f"  spec: {document} \N{SECTION SIGN} {heading}" if heading else f"  spec: {document}")
    return "\n".join(lines)


def text_report(results: Iterable[CompileResult], context: bool = True) -> str:
    results = list(results)
    blocks = [format_diagnostic(d, context) for r in results for d in r.diagnostics]
    bad = sum(1 for r in results if r.diagnostics)
    errors = sum(len(r.diagnostics) for r in results)
    if bad:
        blocks.append(f"{errors} error{'s' * (errors != 1)} in {bad} of {len(results)} "
                      f"file{'s' * (len(results) != 1)}")
    else:
        blocks.append(f"{len(results)} file{'s' * (len(results) != 1)} valid")
    return "\n".join(blocks) + "\n"


def dropped_report(diagnostics: Iterable[Diagnostic], target: str) -> str:
    """What did not carry over to another tool's format (warnings, or errors under --strict), and a count."""
    diagnostics = list(diagnostics)
    kind = diagnostics[0].severity if diagnostics else "warning"
    blocks = [format_diagnostic(d) for d in diagnostics]
    many = len(diagnostics) != 1
    blocks.append(f"{len(diagnostics)} {kind}{'s' * many}: {'fields that do' if many else 'a field that does'} "
                  f"not carry over to {target}")
    return "\n".join(blocks) + "\n"


def diagnostic_dict(d: Diagnostic) -> dict:
    span = d.span
    out = {"code": d.code, "severity": d.severity, "file": d.source,
           "line": span.line if span else 0, "column": span.col if span else 0,
           "origin": span.source if span and span.source else None,
           "path": d.dotted if d.pointer else "", "pointer": d.pointer, "message": d.message, "hint": d.hint}
    if d.labels:  # (only where there are some, so other reports keep their shape)
        out["labels"] = [{"label": label, "line": span.line, "column": span.col} | ({"origin": span.source}
                         if span.source else {}) for label, span in d.labels]
    if d.section:  # a rule's
        out["section"] = d.section
    if d.named_by is not None:  # only for a file the config names, so other reports keep their shape
        named = d.named_by.span
        out["named_by"] = {"file": d.named_by.source, "line": named.line if named else 0,
                           "column": named.col if named else 0, "path": d.named_by.dotted,
                           "pointer": d.named_by.pointer}
    return out


def json_report(results: Iterable[CompileResult]) -> bytes:
    results = list(results)
    files = [{"file": r.source, "valid": not r.diagnostics, "stage": r.stage or None,
              "diagnostics": [diagnostic_dict(d) for d in r.diagnostics]} for r in results]
    summary = {"files": len(files), "invalid_files": sum(1 for f in files if not f["valid"]),
               "errors": sum(len(f["diagnostics"]) for f in files)}
    return orjson.dumps({"files": files, "summary": summary}, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
