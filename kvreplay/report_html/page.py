"""HTML assembly: one self-contained page (inline CSS and SVG, no script, nothing fetched) from sections.

A section is (title, body HTML).  Values are escaped here; numbers are
formatted one way for every table, so two runs' pages differ only where
their data does.
"""
from __future__ import annotations

from html import escape

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
figure { margin: 0.8em 1% 0.8em 0; display: inline-block; width: 48%; vertical-align: top; } figure svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; } p.note { color: #555; font-size: 0.9em; }
nav a { margin-right: 1em; font-size: 0.9em; } .changed { background: #fff3cd; }
"""


def fmt(value) -> str:
    """One cell: integers with separators, floats to 6 significant digits, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.6g}" if abs(value) < 1e15 else f"{value:.6g}"
    return escape(str(value))


def table(header: list[str], rows: list[list], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for k, row in enumerate(rows):
        marked = f' class="{classes[k]}"' if classes and classes[k] else ""
        body.append(f"<tr{marked}>" + "".join(f"<td>{fmt(v)}</td>" for v in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def figure(svg: str, caption: str) -> str:
    return f'<figure class="plot">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def page(title: str, subtitle: str, sections: list[tuple[str, str]]) -> str:
    """The whole document; sections in the order given, with a table of contents."""
    nav = " ".join(f'<a href="#{anchor(t)}">{escape(t)}</a>' for t, _ in sections)
    parts = [f'<section id="{anchor(t)}"><h2>{escape(t)}</h2>{body}</section>' for t, body in sections]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{escape(title)}</h1>{note(subtitle)}<nav>{nav}</nav>{''.join(parts)}</body></html>\n")
