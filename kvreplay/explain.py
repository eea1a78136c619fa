"""`kvreplay explain`: every resolved knob with its value and where it came from."""
from __future__ import annotations

import orjson

from .compiler.diagnostics import pointer_to_dotted
from .compiler.spec import Spec, walk_leaves


def rows(spec: Spec) -> list[dict]:
    out = []
    for pointer, value in walk_leaves(spec.doc):
        out.append({"path": pointer_to_dotted(pointer), "value": value, "provenance": spec.provenance(pointer)})
    for role in sorted(spec.geometry):
        for pointer, value in walk_leaves(spec.geometry[role]):
            out.append({"path": f"geometry.{role}{pointer_to_dotted(pointer) and '.' + pointer_to_dotted(pointer)}",
                        "value": value, "provenance": "inferred(geometry pass)"})
    return out


def _show(value) -> str:
    if isinstance(value, str) and ("\n" in value or len(value) > 200):  # (an opal plan's config_json: in the plan)
        return f"({len(value)} characters of text; see the plan)"
    return orjson.dumps(value).decode() if not isinstance(value, str) else value


def text(spec: Spec) -> str:
    table = rows(spec)
    width = max(len(r["path"]) for r in table)
    value_width = min(max(len(_show(r["value"])) for r in table), 24)
    return "".join(f"{r['path']:<{width}}  {_show(r['value']):<{value_width}}  {r['provenance']}\n" for r in table)


def json_text(spec: Spec) -> bytes:
    return orjson.dumps(rows(spec), option=orjson.OPT_INDENT_2) + b"\n"
