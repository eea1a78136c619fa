"""A JSON text's positions: the line and column of every value and key, and the keys written twice.

`json.loads` keeps no positions, so a diagnostic's position is found afterwards by one walk over the text's
tokens; the load pass asks for it only when it has something to report."""
from __future__ import annotations

import json
import re

from .diagnostics import join_pointer
from .spans import Span

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+')


def _walk_json(text: str):
    """Yield (pointer, key span or None, value span, duplicate flag) for every JSON value, in document order.

    `text` is JSON that `json.loads` has read, so one pass over its tokens (strings, punctuation, bare
    words) is enough: a stack of open containers gives each value its pointer (a 1M-item list in seconds;
    a parser with a tree took minutes)."""
    line, line_start, next_newline = 1, 0, text.find("\n")
    stack: list[list] = []  # [pointer, next index or None for an object, key pointer and span, keys seen]
    for match in _JSON_TOKEN.finditer(text):
        token, at = match.group(), match.start()
        while 0 <= next_newline < at:
            line, line_start, next_newline = line + 1, next_newline + 1, text.find("\n", next_newline + 1)
        if token in ",:":
            continue
        if token in "}]":
            stack.pop()
            continue
        span = Span(line, at - line_start + 1)
        frame = stack[-1] if stack else None
        if frame is not None and frame[1] is None and frame[2] is None:  # an object's key
            key = json.loads(token)
            child = frame[0] + join_pointer(key)
            if key in frame[3]:
                yield child, span, span, True
            frame[3].add(key)
            frame[2] = (child, span)
            continue
        if frame is None:
            pointer, key_span = "", None
        elif frame[1] is None:
            (pointer, key_span), frame[2] = frame[2], None
        else:
            pointer, key_span = f"{frame[0]}/{frame[1]}", None
            frame[1] += 1
        yield pointer, key_span, span, False
        if token == "{":
            stack.append([pointer, None, None, set()])
        elif token == "[":
            stack.append([pointer, 0, None, None])


def json_spans(text: str) -> tuple[dict, dict]:
    values: dict[str, Span] = {}
    keys: dict[str, Span] = {}
    for pointer, key_span, value_span, duplicate in _walk_json(text):
        if duplicate:
            continue
        values.setdefault(pointer, value_span)  # (a key written twice: its first entry, as the report says)
        if key_span is not None:
            keys.setdefault(pointer, key_span)
    return values, keys


def json_duplicates(text: str) -> list[tuple[str, Span]]:
    return [(p, k) for p, k, _, dup in _walk_json(text) if dup]
