"""Load pass: source bytes -> (plain document, span table), or diagnostics.

YAML goes through ruamel.yaml's composer so that every key and value keeps its
line and column; the node graph is then turned into plain dicts/lists here,
which is where duplicate keys, alias blow-up and non-string keys are refused.
JSON is parsed by the standard library (fast, exact numbers); its positions are
computed lazily (json_positions.py), only when a diagnostic needs them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

from . import finite, yaml_bounds, yaml_errors
from .diagnostics import CompileError, Diagnostic, field_words, join_pointer
from .json_positions import json_duplicates, json_spans
from .spans import Span, SpanTable

MAX_BYTES = 64 * 1024 * 1024  # any input (a ReplaySpec's token ids make large JSON); YAML: yaml_bounds.MAX_YAML_BYTES
MAX_EXPANDED_NODES = 200_000  # nodes after alias expansion (billion-laughs guard)
MAX_ALIASES = 1_000


@dataclass(frozen=True)
class Loaded:
    document: Any
    spans: SpanTable
    syntax: str  # "yaml" | "json"


def _fail(code: str, message: str, hint: str, line: int = 1, col: int = 1, pointer: str = "") -> CompileError:
    return CompileError([Diagnostic(code, pointer, message, hint, span=Span(line, col))])


def decode(data: bytes) -> str:
    if len(data) > MAX_BYTES:
        raise _fail("LOAD-SIZE", f"file is {len(data)} bytes, more than the {MAX_BYTES}-byte limit",
                    "split the input or give the requests as a trace file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise _fail("LOAD-ENCODING", f"byte 0x{data[exc.start]:02x} is not valid UTF-8",
                    "save the file as UTF-8", line, col) from None
    return text[1:] if text.startswith("\ufeff") else text


def detect_syntax(name: str, head: str | bytes) -> str:
    """"json" or "yaml", by the file name, else by the first character (`head`: the text or its first bytes)."""
    lowered = name.lower()
    if lowered.endswith(".json"):
        return "json"
    if lowered.endswith((".yaml", ".yml")):
        return "yaml"
    if isinstance(head, bytes):
        head = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    return "json" if head.lstrip().startswith(("{", "[")) else "yaml"


def size_limit(name) -> int:
    """How much of the file `name` is worth reading: a YAML config past its limit is refused unread beyond it."""
    return yaml_bounds.MAX_YAML_BYTES if str(name).lower().endswith((".yaml", ".yml")) else MAX_BYTES


def read_bounded(path, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the file at `path`: enough to tell it is too large, even when it never ends
    (/dev/zero, a pipe) or its size is not known beforehand."""
    with open(path, "rb") as stream:
        return stream.read(limit + 1)


def load_bytes(data: bytes, name: str = "<input>") -> Loaded:
    syntax = detect_syntax(name, data[:4096])
    if syntax == "yaml" and len(data) > yaml_bounds.MAX_YAML_BYTES:  # (before the slow parser, or the decoder)
        raise _fail("LOAD-SIZE", f"the YAML file is {len(data):,} bytes, more than the "
                    f"{yaml_bounds.MAX_YAML_BYTES:,}-byte limit for YAML configs", yaml_bounds.LARGE_HINT)
    text = decode(data)
    loaded = load_json(text) if syntax == "json" else load_yaml(text)
    if not isinstance(loaded.document, dict):
        if loaded.document is None:
            raise _fail("LOAD-EMPTY", "the document is empty", "write a mapping with at least an `engine` key")
        raise _fail("LOAD-NOT-MAPPING", f"the document is a {_kind_name(loaded.document)}, not a mapping",
                    "the top level must be a mapping such as `engine: {...}`")
    return loaded


def _kind_name(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "value")


# --------------------------------------------------------------------------- YAML

def load_yaml(text: str) -> Loaded:
    yaml = YAML(typ="rt", pure=True)
    yaml.Composer = yaml_bounds.BoundedComposer
    try:
        yaml_bounds.check_flow_depth(text)
        nodes = list(yaml.compose_all(text))
    except yaml_bounds.Exceeded as exc:
        raise _fail(exc.code, exc.message, exc.hint, *exc.position) from None
    except MarkedYAMLError as exc:
        raise CompileError([yaml_errors.syntax_diagnostic(exc, text)]) from None
    except YAMLError as exc:
        raise _fail("YAML-SYNTAX", f"YAML syntax error: {str(exc).splitlines()[0]}", "fix the YAML syntax") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        return Loaded(None, SpanTable(), "yaml")
    if len(nodes) > 1:
        mark = nodes[1].start_mark
        raise _fail("YAML-MULTI-DOC", "the file holds more than one YAML document",
                    "keep one configuration per file", mark.line + 1, mark.column + 1)
    builder = _YamlBuilder()
    document = builder.build(nodes[0], "")
    if builder.nonfinite:  # all of them at once, each at its value
        raise CompileError(builder.nonfinite)
    return Loaded(document, SpanTable(builder.values, builder.keys), "yaml")


class _YamlBuilder:
    def __init__(self) -> None:
        self.values: dict[str, Span] = {}
        self.keys: dict[str, Span] = {}
        self.expanded = 0
        self.aliases = 0
        self._seen: set[int] = set()
        self.nonfinite: list[Diagnostic] = []
        self._scalars = YAML(typ="safe", pure=True).constructor

    def build(self, node, pointer: str) -> Any:
        self.expanded += 1
        if id(node) in self._seen:
            self.aliases += 1
        self._seen.add(id(node))
        if self.expanded > MAX_EXPANDED_NODES or self.aliases > MAX_ALIASES:
            mark = node.start_mark
            raise _fail("YAML-ALIAS-BOUND",
                        f"alias expansion exceeds the limit ({MAX_ALIASES} aliases, {MAX_EXPANDED_NODES} nodes)",
                        "write the repeated parts out or use fewer anchors", mark.line + 1, mark.column + 1, pointer)
        self.values.setdefault(pointer, _span(node))
        if isinstance(node, MappingNode):
            return self._mapping(node, pointer)
        if isinstance(node, SequenceNode):
            return [self.build(item, f"{pointer}/{i}") for i, item in enumerate(node.value)]
        return self._scalar(node, pointer)

    def _scalar(self, node: ScalarNode, pointer: str) -> Any:
        tag = node.tag
        if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
                   "tag:yaml.org,2002:null"):
            value = self._scalars.construct_object(node, deep=True)
            if finite.is_nonfinite(value):  # `.nan`, `.inf`, or a literal past float range (`1e400`)
                self.nonfinite.append(finite.diagnostic(pointer, value, str(node.value), _span(node)))
            return value
        return str(node.value)

    def _mapping(self, node: MappingNode, pointer: str) -> dict:
        result: dict[str, Any] = {}
        first_seen: dict[str, Span] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, MappingNode):
                        raise _fail("YAML-MERGE", "a `<<` merge key needs a mapping or a list of mappings",
                                    "merge only anchored mappings", *_pos(source), pointer)
                    for k, v in self._mapping(source, pointer).items():
                        merged.setdefault(k, v)
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag not in ("tag:yaml.org,2002:str",):
                raise _fail("YAML-KEY-TYPE", f"mapping key {key_node.value!r} is not a string",
                            "quote the key or remove it", *_pos(key_node), pointer)
            key = str(key_node.value)
            child = join_pointer_part(pointer, key)
            if key in first_seen:
                first = first_seen[key]
                raise CompileError([Diagnostic("YAML-DUPLICATE-KEY", child, f"key `{key}` appears twice (first at "
                                               f"line {first.line})", "remove one of the two entries",
                                               span=Span(*_pos(key_node)), labels=((f"`{key}` is first given here",
                                                                                    first),))])
            first_seen[key] = _span(key_node)
            self.keys[child] = _span(key_node)
            result[key] = self.build(value_node, child)
        for k, v in merged.items():
            result.setdefault(k, v)
        return result


def join_pointer_part(pointer: str, key: str) -> str:
    return pointer + join_pointer(key)


def _span(node) -> Span:
    return Span(node.start_mark.line + 1, node.start_mark.column + 1)


def _pos(node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


# --------------------------------------------------------------------------- JSON

def load_json(text: str) -> Loaded:
    duplicates: list[str] = []
    literals: list[str] = []  # the NaN / Infinity literals read (most documents have none: no walk then)

    def pairs(items):
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                duplicates.append(k)
            out[k] = v
        return out

    def constant(name):  # `NaN`, `Infinity`: not JSON, but kept to be reported at their positions
        literals.append(name)
        return finite.Written(float(name), name)

    try:
        document = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise _fail("JSON-SYNTAX", f"JSON syntax error: {exc.msg}", "fix the JSON syntax at this position",
                    exc.lineno, exc.colno) from None
    except RecursionError:
        raise _fail("JSON-SYNTAX", "JSON nesting is too deep", "flatten the document") from None
    spans = SpanTable(builder=lambda: json_spans(text))
    if duplicates:
        dup = json_duplicates(text)
        first = dup[0] if dup else ("", Span(1, 1))
        raise CompileError([Diagnostic("JSON-DUPLICATE-KEY", first[0],
                                       f"key `{first[0].rsplit('/', 1)[-1]}` appears twice in one object",
                                       "remove one of the two entries", span=first[1])])
    # Only the literals: a number past float range (`1e400`) is JSON, read as infinity, and left to the
    # schema's ranges and the rules (REPLAYSPEC-TIME names it in a ReplaySpec's times)
    # (the walk over every value took 1.8 of a 10,000-request ReplaySpec's 2.7 s, for literals it rarely has)
    constants = [(p, v) for p, v in finite.nonfinite_values(document) if isinstance(v, finite.Written)] \
        if literals else []
    if constants:
        raise CompileError([Diagnostic("JSON-SYNTAX", pointer, f"JSON syntax error: {field_words(pointer)} is "
                                       f"`{value.text}`, which is not JSON (JSON numbers are finite)", finite.HINT, spans.find(pointer))
                            for pointer, value in constants])
    return Loaded(document, spans, "json")
