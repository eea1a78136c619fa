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


def syntax_diagnostic(exc: MarkedYAMLError, text: str = "") -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = (exc.problem or exc.context or "invalid YAML").strip()
    labels = _opened(exc)
    hint = _layout_hint(problem, text.splitlines(), line) if not labels else None
    return Diagnostic("YAML-SYNTAX", "", f"YAML syntax error: {problem}", hint or _syntax_hint(labels),
                      span=Span(line, col), labels=labels)


def _layout_hint(problem: str, lines: list[str], line: int) -> str | None:
    """What is wrong with the layout of `line` (1-based) when a tab or an indentation is the problem."""
    if "'\\t'" in problem or "\t" in problem:
        return f"YAML indents with spaces only: replace the tab on line {line} with spaces"
    if "mapping values are not allowed" not in problem or not 0 < line <= len(lines):
        return None
    here = lines[line - 1]
    above = next((n for n in range(line - 1, 0, -1) if lines[n - 1].strip() and
                  not lines[n - 1].lstrip().startswith("#")), None)
    if above is None:
        return None
    indent, above_indent = len(here) - len(here.lstrip(" ")), len(lines[above - 1]) - len(lines[above - 1].lstrip(" "))
    key, _, value = lines[above - 1].strip().partition(":")
    if indent > above_indent and value.strip():
        return (f"line {line} is indented {indent} spaces, deeper than `{key}:` on line {above} ({above_indent}), "
                f"which already has a value: indent it {above_indent} spaces to make it a sibling")
    return "a value that holds `: ` must be quoted; otherwise check the indentation of this line"


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
