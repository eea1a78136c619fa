"""Bounds on a YAML config while it is parsed: its size, how many nodes it writes and how deep it nests.

The pure-Python YAML parser takes about 100 microseconds a node on a loaded
2-core machine, so a list of a million items ran for half a minute before the
alias guard (which counts nodes after alias expansion, when the whole node graph
already exists) refused it, and under the wrong name.  Here the composer counts
the nodes as it makes them and stops at the first one past the limit, and the
nesting depth likewise (10,000 levels of `[` ran into the recursion limit after
seconds).  A config is a few dozen values (the largest example: 83 nodes), so
the limits are far above any real one and still end a huge input in about a
second: long request lists belong in a trace file, or in JSON, which the
standard library parses a hundred times faster.
"""
from __future__ import annotations

import re

from ruamel.yaml.composer import Composer
from ruamel.yaml.events import CollectionStartEvent

MAX_YAML_BYTES = 2 * 1024 * 1024  # a YAML config; JSON (ReplaySpecs with token ids) keeps load.MAX_BYTES
MAX_YAML_NODES = 10_000  # keys, values and items as written (an alias counts once)
MAX_YAML_DEPTH = 100  # mappings and lists, one inside the other
_BRACKETS = re.compile(r"[\[\]{}]")
DEEP_HINT = "flatten the document: a config nests a few levels"
LARGE_HINT = "a config is a few dozen values: give long request lists as a trace file, or write the config as JSON"


class Exceeded(Exception):
    """A bound passed while composing: the code, message, hint and the (line, col) of the node that passed it."""

    def __init__(self, code: str, message: str, hint: str, mark) -> None:
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint
        self.position = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


class _Mark:
    def __init__(self, text: str, offset: int) -> None:
        self.line = text.count("\n", 0, offset)
        self.column = offset - (text.rfind("\n", 0, offset) + 1)


def check_flow_depth(text: str) -> None:
    """Refuse more than MAX_YAML_DEPTH open brackets before the parser runs: its scanner looks ahead over nested
    `[` and `{` in time that grows faster than their number (10,000 took seconds before the composer saw one)."""
    depth = 0
    for match in _BRACKETS.finditer(text):  # (a bracket in a quoted string counts too: 100 unclosed ones is no config)
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_YAML_DEPTH:
            raise Exceeded("YAML-TOO-DEEP", f"the YAML nests more than {MAX_YAML_DEPTH} levels deep here",
                           DEEP_HINT, _Mark(text, match.start()))


class BoundedComposer(Composer):
    """ruamel.yaml's composer, counting nodes and depth as it composes them (set as `YAML().Composer`)."""

    def __init__(self, loader=None) -> None:
        super().__init__(loader)
        self.nodes = 0
        self.levels = 0

    def compose_node(self, parent, index):
        self.nodes += 1
        if self.nodes > MAX_YAML_NODES:
            raise Exceeded("YAML-TOO-MANY-NODES", f"the YAML has more than {MAX_YAML_NODES:,} keys, values and "
                           "items (counted up to here)", LARGE_HINT, self.parser.peek_event().start_mark)
        if not self.parser.check_event(CollectionStartEvent):  # (a scalar, or an alias of a node counted already)
            return super().compose_node(parent, index)
        self.levels += 1
        if self.levels > MAX_YAML_DEPTH:
            raise Exceeded("YAML-TOO-DEEP", f"the YAML nests more than {MAX_YAML_DEPTH} levels deep here", DEEP_HINT,
                           self.parser.peek_event().start_mark)
        node = super().compose_node(parent, index)
        self.levels -= 1
        return node
