"""JSON Schema checks as diagnostics: the strict validators and the conversion of their errors.

Shared by the validate pass and the front-ends (which check their own input language before
lowering it), so neither has to import the other.  jsonschema's errors are turned into our own
diagnostics: one per unknown key
(with a "did you mean"), strict integers (``16.0`` and ``"16"`` are not
integers), enum values with the closest allowed one, and for `anyOf` choices
(a catalog name or an inline object) only the branch that fits the value's type.
A document is first checked by the schema's compiled predicate (`schema_fast`, the same
verdict); jsonschema is imported and run only for one that has errors, to explain them.
"""
from __future__ import annotations

import difflib
import math
from functools import lru_cache
from typing import Any, Iterable

from ..schema import PREDICT, REPLAYSPEC, load_schema
from .config_units import unit_hint
from .diagnostics import Diagnostic, field_words, join_pointer
from .schema_fast import compile_check

OTHER_STACKS = {"router": "the router stack", "planner": "the planner stack"}
_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
               "object": "a mapping", "array": "a list", "null": "null"}


def _strict_integer(checker, instance) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@lru_cache(maxsize=None)
def _strict_class():
    """jsonschema's Draft 2020-12 validator with strict integers (imported here: only an error needs it)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend
    return extend(Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", _strict_integer))


@lru_cache(maxsize=None)
def documents() -> dict[str, dict]:
    """Every schema of the package by its `$id`, so one may `$ref` another (ReplaySpec -> predict `engine`)."""
    return {s["$id"]: s for s in (load_schema(name) for name in (PREDICT, REPLAYSPEC))}


@lru_cache(maxsize=None)
def registry():
    from referencing import Registry, Resource
    return Registry().with_resources((i, Resource.from_contents(s)) for i, s in documents().items())


class SchemaChecker:
    """One schema's two checks: a compiled predicate (`schema_fast`) that vouches for a valid document, and
    jsonschema's strict validator, made when first needed, for the errors of one it cannot vouch for."""

    __slots__ = ("schema", "_fast", "_slow")

    def __init__(self, schema: dict):
        self.schema, self._fast, self._slow = schema, False, None

    def certainly_valid(self, document: Any) -> bool:
        if self._fast is False:
            self._fast = compile_check(self.schema, self.schema, documents())
        return self._fast is not None and self._fast(document)

    def iter_errors(self, document: Any):
        if self._slow is None:
            self._slow = _strict_class()(self.schema, registry=registry())
        return self._slow.iter_errors(document)


def strict_validator(schema: dict) -> SchemaChecker:
    return SchemaChecker(schema)


@lru_cache(maxsize=None)
def validator(name: str = PREDICT) -> SchemaChecker:
    return strict_validator(load_schema(name))


def describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f'the string "{value}"' if len(value) < 40 else "a string"
    return repr(value)


def suggest(word: str, choices: Iterable[str]) -> str:
    choices = sorted(str(c) for c in choices)
    close = difflib.get_close_matches(str(word), choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean `{close[0]}`?"
    return "allowed: " + ", ".join(f"`{c}`" for c in choices)


def schema_errors(document: dict, schema_name: str = PREDICT) -> list[Diagnostic]:
    return errors_of(validator(schema_name), document)


def errors_of(checker: SchemaChecker, document: dict) -> list[Diagnostic]:
    """The document's diagnostics; none, without jsonschema, for a document the compiled check vouches for."""
    if checker.certainly_valid(document):
        return []
    return jsonschema_errors(checker, document)


def jsonschema_errors(checker: SchemaChecker, document: dict) -> list[Diagnostic]:
    """The diagnostics of jsonschema's errors (the document's whole verdict, as `errors_of` but never fast)."""
    out: dict[Diagnostic, None] = {}
    for error in checker.iter_errors(document):
        out.update(dict.fromkeys(_convert(error)))
    return list(out)


def _pointer(error) -> str:
    return join_pointer(*error.absolute_path)


def _convert(error) -> list[Diagnostic]:
    kind = error.validator
    pointer = _pointer(error)
    value = error.instance
    schema = error.schema
    if kind == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        extras = sorted(k for k in value if k not in allowed)
        diags = []
        for key in extras:
            child = pointer + join_pointer(key)
            if not pointer and key in OTHER_STACKS:
                diags.append(Diagnostic("SCHEMA-OTHER-STACK", child,
                                        f"`{key}` configures {OTHER_STACKS[key]}, not the engine stack",
                                        f"remove `{key}`, or run it with the {key} stack"))
                continue
            diags.append(Diagnostic("SCHEMA-UNKNOWN-KEY", child, f"unknown key `{key}`", suggest(key, allowed)))
        return diags
    if kind == "required":
        missing = error.validator_value
        present = value if isinstance(value, dict) else {}
        parent = "under `" + ".".join(map(str, error.absolute_path)) + "`" if error.absolute_path else "at the top level"
        return [Diagnostic("SCHEMA-REQUIRED", pointer + join_pointer(k), f"missing required key `{k}`",
                           f"add `{k}` {parent}") for k in missing if k not in present]
    if kind == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in wanted)
        hint = f"write {names}"
        if "integer" in wanted and isinstance(value, float) and value.is_integer():
            hint = f"write {int(value)} (integers are strict: no decimal point)"
        elif "integer" in wanted and isinstance(value, float) and math.isfinite(value):
            hint = f"write a whole number, e.g. {math.floor(value)} or {math.ceil(value)}"
        elif "integer" in wanted and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            hint = f"write {value.strip()} without quotes"
        elif "number" in wanted and isinstance(value, str) and _plain_number(value):
            hint = f"write {value.strip()} without quotes"
        elif isinstance(value, str) and ("number" in wanted or "integer" in wanted):
            hint = unit_hint(value, schema, pointer) or hint
        return [Diagnostic("SCHEMA-TYPE", pointer, f"expected {names}, got {describe(value)}", hint)]
    if kind in ("enum", "const"):
        allowed = error.validator_value if kind == "enum" else [error.validator_value]
        return [Diagnostic("SCHEMA-ENUM", pointer, f"{describe(value)} is not one of the allowed values",
                           suggest(value, [str(a) for a in allowed]))]
    if kind in ("maximum", "exclusiveMaximum"):
        return [_too_large(pointer, value, error.validator_value, kind == "exclusiveMaximum")]
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        words = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "greater than",
                 "exclusiveMaximum": "less than"}[kind]
        return [Diagnostic("SCHEMA-RANGE", pointer, f"{field_words(pointer)} is {describe(value)}, out of its range: "
                           f"must be {words} {error.validator_value}", f"use a value {words} {error.validator_value}")]
    if kind in ("minItems", "maxItems", "minLength"):
        return [Diagnostic("SCHEMA-SIZE", pointer, f"{describe(value)} has the wrong size ({kind} "
                           f"{error.validator_value})", "see `kvreplay schema` for the allowed sizes")]
    if kind in ("anyOf", "oneOf"):
        return _convert_choice(error)
    return [Diagnostic("SCHEMA-INVALID", pointer, error.message, "see `kvreplay schema`")]


def _plain_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _too_large(pointer: str, value: Any, limit: int | float, exclusive: bool) -> Diagnostic:
    """Above a field's maximum: the field, the value and the limit by name (`2^40 - 1` where it is one)."""
    words = "less than" if exclusive else "at most"
    return Diagnostic("SCHEMA-RANGE", pointer, f"{field_words(pointer)} is {_amount(value)}, more than its limit: "
                      f"must be {words} {_amount(limit)}",
                      f"use a value {words} {_amount(limit)} (`kvreplay schema` gives every field's range)")


def _amount(value: Any) -> str:
    """A number as written, and a power of two (or one less) as such: `1099511627775 (2^40 - 1)`."""
    text = describe(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024:
        for power, suffix in ((value, ""), (value + 1, " - 1")):
            if power & (power - 1) == 0:
                return f"{text} (2^{power.bit_length() - 1}{suffix})"
    return text


def _convert_choice(error) -> list[Diagnostic]:
    """Report only the branch whose type matches the value, else list the choices."""
    value = error.instance
    by_branch: dict[int, list] = {}
    for sub in error.context:
        by_branch.setdefault(sub.schema_path[0], []).append(sub)
    fitting = [errs for errs in by_branch.values() if not any(e.validator in ("type", "const") and
                                                              len(e.relative_path) == 0 for e in errs)]
    if len(fitting) == 1:
        return [d for sub in fitting[0] for d in _convert(sub)]
    options = []
    for branch in error.validator_value:
        if "const" in branch:
            options.append(f"`{branch['const']}`")
        elif "type" in branch:
            types = branch["type"] if isinstance(branch["type"], list) else [branch["type"]]
            options.extend(_TYPE_NAMES.get(t, t) for t in types)
        elif "$ref" in branch:
            options.append("a mapping")
    text = " or ".join(dict.fromkeys(options))
    hint = unit_hint(value, error.schema, _pointer(error)) if isinstance(value, str) else None
    return [Diagnostic("SCHEMA-TYPE", _pointer(error), f"expected {text}, got {describe(value)}",
                       hint or f"write {text}")]
