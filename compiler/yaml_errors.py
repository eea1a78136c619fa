"""A YAML syntax error as a diagnostic: at the problem, with where the construct it is in was opened.

ruamel.yaml's error carries two marks: the problem (`expected ',' or ']'`, often a
line or more after the mistake) and its context (`while parsing a flow sequence`,
at the `[`).  The diagnostic is at the problem and has the context as a secondary
label, "the flow sequence was opened here", and the hint says what closes it, so an
unclosed bracket or quote is found where it was opened rather than where the
parser gave up.
"""
from __future__ import annotations

from ruamel.yaml.error import MarkedYAMLError

from .diagnostics import Diagnostic
from .spans import Span


def syntax_diagnostic(exc: MarkedYAMLError) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = (exc.problem or exc.context or "invalid YAML").strip()
    labels = _opened(exc)
    return Diagnostic("YAML-SYNTAX", "", f"YAML syntax error: {problem}", _syntax_hint(labels), span=Span(line, col),
                      labels=labels)


def _opened(exc: MarkedYAMLError) -> tuple[tuple[str, Span], ...]:
    """Where the construct the parser was in was opened ("while parsing a flow sequence" at its `[`), as a label."""
    context, mark = (exc.context or "").strip(), exc.context_mark
    if not context.startswith(("while parsing a ", "while scanning a ")) or mark is None or mark == exc.problem_mark:
        return ()
    what = context.split(" a ", 1)[1]
    return ((f"the {what} {'was opened' if 'flow' in what or 'quoted' in what else 'starts'} here",
             Span(mark.line + 1, mark.column + 1)),)


def _syntax_hint(labels) -> str:
    closer = {"flow sequence": "`]`", "flow mapping": "`}`", "quoted scalar": "its quote"}
    for label, span in labels:
        for what, close in closer.items():
            if what in label:
                return f"close the {what} opened at line {span.line} with {close}, or fix the YAML syntax here"
    return "fix the YAML syntax at this position (check indentation, colons and quotes)"
