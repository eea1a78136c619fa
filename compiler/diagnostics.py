"""Errors as values: a diagnostic names what is wrong and where, never how to print it.

A `Diagnostic` carries a stable code (a rule id such as ``G2-BACKEND`` or a
loader code such as ``YAML-SYNTAX``), the JSON pointer it blames, a message
without any position, and a hint saying what to do.  Positions are attached by
`locate` from the span table built at load time; reporters format them.  A
diagnostic about a file the config names (a trace) is positioned in that file
and also carries `named_by`: where the config names it.  A rule's diagnostic
names its spec section and may name `related` pointers (where `backend: sglang`
is, for a G2-BACKEND conflict), which `locate` turns into secondary labels.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from .spans import Span, SpanTable


@dataclass(frozen=True)
class NamedBy:
    """The config value that names the file a diagnostic is about (e.g. ``/traffic/source/paths/0``)."""

    pointer: str
    span: Span | None = None
    source: str = ""

    @property
    def dotted(self) -> str:
        return pointer_to_dotted(self.pointer)


@dataclass(frozen=True, order=False)
class Diagnostic:
    code: str
    pointer: str
    message: str
    hint: str = ""
    span: Span | None = None
    source: str = ""
    severity: str = "error"
    named_by: NamedBy | None = None
    labels: tuple[tuple[str, Span], ...] = ()  # secondary places in the same file, each with what it is
    at_key: bool = False  # a rule's: a mapping or list it blames is shown at its key (`host_offload:`), not inside
    # (what it is, pointer, shown at its key): the other half of a conflict, positioned by `locate`
    related: tuple[tuple[str, str, bool], ...] = ()
    section: str = ""  # a rule's: the spec section it comes from (`kv-cache-tiers.md: Host offload (G2) / ...`)

    @property
    def dotted(self) -> str:
        return pointer_to_dotted(self.pointer)

    def sort_key(self):
        span = self.span or Span(0, 0)
        return (self.source, span.line, span.col, self.pointer, self.code, self.message)


class CompileError(Exception):
    """Raised inside a pass to stop the pipeline with diagnostics."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics = tuple(diagnostics)
        super().__init__("; ".join(d.message for d in self.diagnostics))


def pointer_to_dotted(pointer: str) -> str:
    if not pointer:
        return "(document)"
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    out = ""
    for part in parts:
        if part.isdigit():
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def field_words(pointer: str) -> str:
    """The field a pointer ends at, as a message names it: `blocks`, item 2 of `prefill`, the document."""
    parts = split_pointer(pointer)
    if not parts:
        return "the document"
    if parts[-1].isdigit():
        return f"item {parts[-1]} of `{parts[-2]}`" if len(parts) > 1 else f"item {parts[-1]}"
    return f"`{parts[-1]}`"


def join_pointer(*parts) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def split_pointer(pointer: str) -> tuple[str, ...]:
    if not pointer:
        return ()
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:])


def locate(diagnostics: Iterable[Diagnostic], spans: SpanTable | None, source: str) -> tuple[Diagnostic, ...]:
    """Attach file name and position to each diagnostic, then sort them."""
    located = []
    for d in diagnostics:
        span = d.span
        if span is None and spans is not None:
            key = d.code.startswith("SCHEMA-UNKNOWN") or (d.at_key and spans.is_collection(d.pointer))
            span = spans.find(d.pointer, key=key)
        named_by = d.named_by
        if named_by is not None and named_by.span is None and spans is not None:
            named_span = spans.find(named_by.pointer)
            named_by = replace(named_by, span=named_span, source=source)
        labels = d.labels + tuple((label, spans.find(pointer, key=at_key)) for label, pointer, at_key in d.related) \
            if spans is not None else d.labels
        located.append(replace(d, span=span, source=d.source or (span.source if span else "") or source,
                               named_by=named_by, labels=labels, related=()))
    return tuple(sorted(set(located), key=Diagnostic.sort_key))
