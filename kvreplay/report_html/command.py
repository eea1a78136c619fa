"""`kvreplay report RUN_DIR` and `kvreplay diff A B`: read the run folders, write the page or the comparison.

Every failure is one line on stderr (exit 2 for a missing or unreadable run
folder, 1 when the output cannot be written), never a traceback.
"""
from __future__ import annotations

import sys
from pathlib import Path

# (the page's modules are imported when a page is made: every command builds the argument parser from here)

EXIT_OK, EXIT_WRITE, EXIT_USAGE = 0, 1, 2


def report_html(run) -> str:
    from . import page
    from .sections import run_sections

    subtitle = f"kvreplay run {run.name}: {run.summary.get('completed_requests')} of " \
               f"{run.summary.get('num_requests')} requests completed"
    return page.page(f"kvreplay report: {run.name}", subtitle, run_sections(run))


def _write_text(path: Path, text: str) -> bool:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        sys.stderr.write(f"kvreplay: cannot write {path}: {error.strerror or error}\n")
        return False
    return True


def write_report(folder, output: Path) -> bool:
    """`predict --report`: the page of the run just written (False, with the reason on stderr, on failure)."""
    from .figures import PlotUnavailable
    from .load import RunDirError, load_run

    try:
        text = report_html(load_run(folder))
    except (RunDirError, PlotUnavailable) as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return False
    return _write_text(output, text)


def cmd_report(args) -> int:
    from .figures import PlotUnavailable
    from .load import RunDirError, load_run

    try:
        run = load_run(args.run_dir)
        text = report_html(run)
    except (RunDirError, PlotUnavailable) as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_USAGE
    output = Path(args.output) if args.output else run.path / "report.html"
    if not _write_text(output, text):
        return EXIT_WRITE
    sys.stdout.write(f"wrote {output}\n")
    return EXIT_OK


def cmd_diff(args) -> int:
    from . import diff
    from .figures import PlotUnavailable
    from .load import RunDirError, load_run

    try:
        a, b = load_run(args.a), load_run(args.b)
        result = diff.compare(a, b)
        text = {"text": diff.text, "json": diff.json_text, "html": diff.html}[args.format](result, a, b)
    except (RunDirError, PlotUnavailable) as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_USAGE
    if args.output:
        return EXIT_OK if _write_text(Path(args.output), text) else EXIT_WRITE
    sys.stdout.write(text)
    return EXIT_OK


def add_commands(sub) -> None:
    p = sub.add_parser("report", help="write one self-contained HTML page of a run folder (plots, tables)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a `kvreplay predict` --output-dir")
    p.add_argument("-o", "--output", metavar="FILE.html", help="where the page goes (default: RUN_DIR/report.html)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("diff", help="compare two run folders: summary and per-request deltas, overlaid plots")
    p.add_argument("a", metavar="A", help="the first run folder")
    p.add_argument("b", metavar="B", help="the second run folder (deltas are B - A)")
    p.add_argument("--format", choices=("text", "json", "html"), default="text",
                   help="text: the differences for people (default); json: for tools; html: a page with plots")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout (default: stdout)")
    p.set_defaults(func=cmd_diff)
