"""Fast JSON checks for long request lists: immutable JSON records and schema predicates.

`compile_check` turns the subset of JSON Schema the request schema uses into one
Python predicate that says "certainly valid" quickly; whatever it cannot vouch
for goes to jsonschema for its diagnostics.  `frozen_json` builds immutable
list/dict records that pyrsistent's freeze/thaw pass through untouched and
orjson writes natively, so a 10,000-request list is not copied pass after pass.
"""
from __future__ import annotations

from typing import Any, Callable

def _immutable(self, *args, **kwargs):
    raise TypeError(f"{type(self).__name__} is immutable")


class FrozenList(list):
    """An immutable JSON array (request lists, prompt token ids): pyrsistent's freeze/thaw pass it through
    untouched, orjson and jsonschema see a list, so long request lists cost nothing to freeze or thaw."""

    __slots__ = ()
    append = extend = insert = pop = remove = clear = sort = reverse = _immutable
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self):
        return (type(self), (list(self),))


class FrozenDict(dict):
    """An immutable JSON object (one request, one kv hint); see `FrozenList`."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _immutable

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.items())))

    def __reduce__(self):
        return (type(self), (dict(self),))


_SCALARS = frozenset({int, float, str, bool, type(None)})
_INT = frozenset({int})


def frozen_json(value: Any) -> Any:
    """A JSON value as FrozenDict / FrozenList all the way down."""
    if isinstance(value, dict):
        return FrozenDict({k: frozen_json(v) for k, v in value.items()})
    if isinstance(value, list):
        if set(map(type, value)) <= _SCALARS:
            return FrozenList(value)
        return FrozenList(map(frozen_json, value))
    return value


# ------------------------------------------------------------------ a fast "certainly valid" check

_ANNOTATIONS = frozenset({"description", "title", "x-unit", "$comment", "examples", "default"})
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "minimum", "maximum",
                       "exclusiveMinimum", "exclusiveMaximum", "minLength", "minItems", "enum", "const"}) | _ANNOTATIONS
_TYPES: dict[str, Callable[[Any], bool]] = {
    "integer": lambda x: type(x) is int,
    "number": lambda x: type(x) is int or type(x) is float,
    "string": lambda x: type(x) is str,
    "boolean": lambda x: type(x) is bool,
    "null": lambda x: x is None,
    "object": lambda x: isinstance(x, dict),  # as jsonschema: plain JSON (FrozenDict / FrozenList included)
    "array": lambda x: isinstance(x, list),
}
Check = Callable[[Any], bool]


def compile_check(schema: dict, root: dict, depth: int = 0) -> Check | None:
    """A predicate that is true only for values `schema` certainly accepts (strict integers, as validate.py).

    It understands the subset of JSON Schema the request schema uses; for anything
    else it returns None and the caller falls back to jsonschema.  False means
    "let jsonschema look", never "invalid" by itself.
    """
    if depth > 16 or not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        ref = schema["$ref"]
        if set(schema) - {"$ref"} - _ANNOTATIONS or not ref.startswith("#/$defs/"):
            return None
        return compile_check(root.get("$defs", {}).get(ref[len("#/$defs/"):]), root, depth + 1)
    if set(schema) - _KEYWORDS:
        return None
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if any(k not in _TYPES for k in kinds):
        return None
    # each test below may assume the value has its kind when the schema names that one kind only
    tests: list[Check] = []
    if kinds:
        type_tests = [_TYPES[k] for k in kinds]
        tests.append(type_tests[0] if len(type_tests) == 1 else lambda x: any(t(x) for t in type_tests))

    def guarded(kind_name: str, test: Check) -> Check:
        if kinds == [kind_name] or (kind_name == "number" and kinds == ["integer"]):
            return test
        is_kind = _TYPES[kind_name]
        return lambda x: not is_kind(x) or test(x)

    for keyword, make in (("minimum", lambda m: lambda x: x >= m), ("maximum", lambda m: lambda x: x <= m),
                          ("exclusiveMinimum", lambda m: lambda x: x > m),
                          ("exclusiveMaximum", lambda m: lambda x: x < m)):
        if keyword in schema:
            tests.append(guarded("number", make(schema[keyword])))
    if "minLength" in schema:
        tests.append(guarded("string", lambda x, n=schema["minLength"]: len(x) >= n))
    if "minItems" in schema:
        tests.append(guarded("array", lambda x, n=schema["minItems"]: len(x) >= n))
    for keyword in ("enum", "const"):
        if keyword in schema:
            allowed = schema[keyword] if keyword == "enum" else [schema[keyword]]
            if not all(type(a) is str for a in allowed):
                return None
            tests.append(lambda x, allowed=frozenset(allowed): type(x) is str and x in allowed)
    if "items" in schema:
        items = _array_check(schema["items"], root, depth)
        if items is None:
            return None
        tests.append(guarded("array", items))
    if {"properties", "required", "additionalProperties"} & set(schema):
        members = _object_check(schema, root, depth)
        if members is None:
            return None
        tests.append(guarded("object", members))
    return _all_of(tests)


def _all_of(tests: list[Check]) -> Check:
    if not tests:
        return lambda x: True
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:
        a, b = tests
        return lambda x: a(x) and b(x)
    if len(tests) == 3:
        a, b, c = tests
        return lambda x: a(x) and b(x) and c(x)
    return lambda x: all(test(x) for test in tests)


def _array_check(items: dict, root: dict, depth: int) -> Check | None:
    if isinstance(items, dict) and items.get("type") == "integer" and set(items) <= {"type", "minimum", "maximum"} \
            | _ANNOTATIONS:  # a long list of ints: one C-speed pass for the type, min() and max() for the range
        low, high = items.get("minimum"), items.get("maximum")
        return lambda xs: (set(map(type, xs)) <= _INT
                           and (not xs or ((low is None or min(xs) >= low) and (high is None or max(xs) <= high))))
    each = compile_check(items, root, depth + 1)
    return None if each is None else (lambda xs: all(map(each, xs)))


def _object_check(schema: dict, root: dict, depth: int) -> Check | None:
    extra = schema.get("additionalProperties", True)
    if extra not in (True, False):
        return None
    properties = {}
    for name, sub in schema.get("properties", {}).items():
        properties[name] = compile_check(sub, root, depth + 1)
        if properties[name] is None:
            return None
    required = tuple(schema.get("required", ()))

    def members(x) -> bool:
        for key, value in x.items():
            check = properties.get(key)
            if check is None:
                if not extra:
                    return False
            elif not check(value):
                return False
        return all(key in x for key in required)

    return members
