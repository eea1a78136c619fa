"""Our JSON Schemas compiled to one exact Python predicate: is a document valid, without jsonschema.

`compile_check(schema, root, documents)` returns a function that gives the same
verdict as the project's strict Draft 2020-12 validator (`schema_check`: an integer
is an `int`, never `2.0` or `true`) for the keywords our schemas use, or None when
the schema uses any other keyword (the caller then asks jsonschema).  Each keyword
below mirrors jsonschema's own (`jsonschema/_keywords.py`): a keyword applies only
to values of its kind, `enum` / `const` compare as jsonschema's `equal` (`true` is
not `1`), `if` picks `then` or `else`.  A valid config is vouched for in
microseconds, and jsonschema (0.13 s to import) is loaded only to explain an error.
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Callable
from urllib.parse import unquote, urldefrag, urljoin

Check = Callable[[Any], bool]

# keywords that never fail a value (`then` / `else` act only through `if`, `$defs` only through `$ref`)
_PASSIVE = frozenset({"description", "title", "x-unit", "$comment", "examples", "default", "$schema", "$defs",
                      "then", "else", "deprecated", "readOnly", "writeOnly"})
_TYPES: dict[str, Check] = {  # jsonschema's draft 2020-12 type checker, with the strict integer of schema_check
    "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "number": lambda x: isinstance(x, numbers.Number) and not isinstance(x, bool),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
}
_INT = frozenset({int})


class Unsupported(Exception):
    """The schema uses something this module does not mirror: leave the document to jsonschema."""


def compile_check(schema: Any, root: dict, documents: Mapping[str, dict] = {}) -> Check | None:
    """The predicate of `schema` (a node of `root`); `documents` are the other schemas a `$ref` may name by `$id`."""
    try:
        return _Compiler(documents).node(schema, root)
    except Unsupported:
        return None


class _Compiler:
    def __init__(self, documents: Mapping[str, dict]):
        self.documents = documents
        self.done: dict[tuple[int, int], Check] = {}

    def node(self, schema: Any, root: dict) -> Check:
        if schema is True:
            return lambda x: True
        if schema is False:
            return lambda x: False
        if not isinstance(schema, dict):
            raise Unsupported(schema)
        key = (id(schema), id(root))
        if key in self.done:
            return self.done[key]
        self.done[key] = lambda x: self.done[key](x)  # a recursive `$ref` calls the finished check
        check = _all_of(self.tests(schema, root))
        self.done[key] = check
        return check

    def tests(self, schema: dict, root: dict) -> list[Check]:
        if "$id" in schema and schema is not root:
            raise Unsupported("$id")
        tests: list[Check] = []
        known = set(_PASSIVE) | {"$id"}
        if "type" in schema:
            kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if any(k not in _TYPES for k in kinds):
                raise Unsupported(kinds)
            type_tests = [_TYPES[k] for k in kinds]
            tests.append(type_tests[0] if len(type_tests) == 1 else lambda x: any(t(x) for t in type_tests))
            known.add("type")
        for word, make in _KINDED.items():
            if word in schema:
                tests.append(make(self, schema, root))
                known.add(word)
        for word, make in _APPLICATORS.items():
            if word in schema:
                tests.append(make(self, schema, root))
                known.add(word)
        if "additionalProperties" in schema or "properties" in schema or "required" in schema:
            tests.append(_kind("object", self.members(schema, root)))
            known |= {"additionalProperties", "properties", "required"}
        if set(schema) - known:
            raise Unsupported(sorted(set(schema) - known))
        return tests

    def ref(self, ref: str, root: dict) -> Check:
        uri, fragment = urldefrag(urljoin(root.get("$id", ""), ref))
        document = root if uri == root.get("$id", "") else self.documents.get(uri)
        if document is None or (fragment and not fragment.startswith("/")):
            raise Unsupported(ref)
        node: Any = document
        for part in fragment.split("/")[1:]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise Unsupported(ref)
        return self.node(node, document)

    def members(self, schema: dict, root: dict) -> Check:
        properties = {name: self.node(sub, root) for name, sub in schema.get("properties", {}).items()}
        extra = schema.get("additionalProperties", True)
        extra_check = None if isinstance(extra, bool) else self.node(extra, root)
        required = tuple(schema.get("required", ()))

        def members(x: dict) -> bool:
            for key, value in x.items():
                check = properties.get(key)
                if check is None:
                    if extra is False or (extra_check is not None and not extra_check(value)):
                        return False
                elif not check(value):
                    return False
            return all(key in x for key in required)

        return members

    def items(self, schema: dict, root: dict) -> Check:
        items = schema["items"]
        if isinstance(items, dict) and items.get("type") == "integer" and set(items) <= {"type", "minimum",
                                                                                            "maximum"} | _PASSIVE:
            # a long list of ints (prompt token ids): the types in one C-speed pass, the range by min() and max()
            low, high, each = items.get("minimum"), items.get("maximum"), self.node(items, root)

            def ints(xs: list) -> bool:
                if set(map(type, xs)) <= _INT:
                    return not xs or ((low is None or min(xs) >= low) and (high is None or max(xs) <= high))
                return all(map(each, xs))
            return _kind("array", ints)
        each = self.node(items, root)
        return _kind("array", lambda xs: all(map(each, xs)))


def _kind(name: str, test: Check) -> Check:
    """`test` for values of one kind; a keyword passes every other value (as in jsonschema)."""
    is_kind = _TYPES[name]
    return lambda x: not is_kind(x) or test(x)


def _all_of(tests: list[Check]) -> Check:
    if not tests:
        return lambda x: True
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:
        a, b = tests
        return lambda x: a(x) and b(x)
    return lambda x: all(test(x) for test in tests)


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's `equal`: `true` is not `1`, `1` is `1.0`, containers compare item by item."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    return one == two


def _enum(allowed: list) -> Check:
    if allowed and all(type(a) is str for a in allowed):
        names = frozenset(allowed)
        return lambda x: isinstance(x, str) and x in names
    return lambda x: any(_equal(a, x) for a in allowed)


def _bound(word: str, limit: Any) -> Check:
    compare = {"minimum": lambda x: not x < limit, "maximum": lambda x: not x > limit,
               "exclusiveMinimum": lambda x: not x <= limit, "exclusiveMaximum": lambda x: not x >= limit}[word]
    return _kind("number", compare)


def _size(kind: str, low: bool) -> Callable[[_Compiler, dict, dict], Check]:
    word = {("string", True): "minLength", ("string", False): "maxLength", ("array", True): "minItems",
            ("array", False): "maxItems", ("object", True): "minProperties", ("object", False): "maxProperties"}
    name = word[kind, low]
    if low:
        return lambda c, s, r: _kind(kind, lambda x, n=s[name]: len(x) >= n)
    return lambda c, s, r: _kind(kind, lambda x, n=s[name]: len(x) <= n)


# keywords on one value, each passing values not of its kind
_KINDED: dict[str, Callable[[_Compiler, dict, dict], Check]] = {
    **{word: (lambda c, s, r, w=word: _bound(w, s[w]))
       for word in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")},
    "minLength": _size("string", True), "maxLength": _size("string", False),
    "minItems": _size("array", True), "maxItems": _size("array", False),
    "minProperties": _size("object", True), "maxProperties": _size("object", False),
    "enum": lambda c, s, r: _enum(list(s["enum"])),
    "const": lambda c, s, r: _enum([s["const"]]) if type(s["const"]) is str else (lambda x: _equal(s["const"], x)),
    "items": lambda c, s, r: c.items(s, r),
}


def _if(c: _Compiler, schema: dict, root: dict) -> Check:
    test = c.node(schema["if"], root)
    then = c.node(schema.get("then", True), root)
    otherwise = c.node(schema.get("else", True), root)
    return lambda x: then(x) if test(x) else otherwise(x)


def _one_of(c: _Compiler, schema: dict, root: dict) -> Check:
    branches = [c.node(s, root) for s in schema["oneOf"]]
    return lambda x: sum(1 for b in branches if b(x)) == 1


def _any_of(c: _Compiler, schema: dict, root: dict) -> Check:
    branches = [c.node(s, root) for s in schema["anyOf"]]
    return lambda x: any(b(x) for b in branches)


def _all_of_keyword(c: _Compiler, schema: dict, root: dict) -> Check:
    return _all_of([c.node(s, root) for s in schema["allOf"]])


def _not(c: _Compiler, schema: dict, root: dict) -> Check:
    inner = c.node(schema["not"], root)
    return lambda x: not inner(x)


# keywords that combine subschemas
_APPLICATORS: dict[str, Callable[[_Compiler, dict, dict], Check]] = {
    "$ref": lambda c, s, r: c.ref(s["$ref"], r), "allOf": _all_of_keyword, "anyOf": _any_of, "oneOf": _one_of,
    "not": _not, "if": _if,
}
