"""The `Rule` record and the small predicates the rule modules are written with.

Kept apart from the package's `__init__` (which collects every module's rules) so that a rule
module imports this one and never the package that imports it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping

from ..diagnostics import Diagnostic
from ..spec import Spec, role_pointer

Check = Callable[[Spec], Iterable[str]]


@dataclass(frozen=True)
class Rule:
    id: str
    section: str
    message: str
    hint: str
    check: Check
    stage: str = "spec"
    supersedes: tuple[str, ...] = ()  # rules whose diagnostics this one replaces when both fire (a more specific reason)
    # the other half of a conflict: (what it is, pointer), labelled where written; `{role}` in the pointer is the
    # blamed role's, `{value}` in the label the value written there
    related: tuple[tuple[str, str], ...] = ()

    def diagnostics(self, spec: Spec) -> Iterator[Diagnostic]:
        for pointer in self.check(spec):
            yield Diagnostic(self.id, pointer, self.message, self.hint, at_key=True, section=self.section,
                             related=tuple(self._related(spec, pointer)))

    def _related(self, spec: Spec, blamed: str) -> Iterator[tuple[str, str, bool]]:
        role = "/".join(blamed.split("/")[:4]) if blamed.startswith("/engine/workers/") else None
        for label, template in self.related:
            if "{role}" in template and role is None:
                continue
            pointer = template.replace("{role}", role or "")
            if pointer != blamed and spec.user_set(pointer):  # (a default has no place to show)
                value = spec.get(pointer)  # (a mapping is shown at its key, as the blamed one is)
                yield label.replace("{value}", _written(value)), pointer, isinstance(value, Mapping)


def _written(value) -> str:
    """A scalar as the YAML that sets it would read (`true`, `sglang`, `2`)."""
    return {True: "true", False: "false"}.get(value, str(value)) if isinstance(value, bool) else str(value)


RolePredicate = Callable[[Spec, str], bool]


def role_check(when: RolePredicate, *blame: str, roles: tuple[str, ...] | None = None) -> Check:
    """Blame `engine.workers.<role>.<blame>` (or the nearest written parent) for each role where `when` holds."""

    def check(spec: Spec) -> Iterator[str]:
        for role in spec.roles():
            if roles is not None and role not in roles:
                continue
            if when(spec, role):
                yield first_written(spec, role, blame)

    return check


def first_written(spec: Spec, role: str, blame: tuple[str, ...]) -> str:
    """The deepest pointer of `blame` under the role that the user actually wrote."""
    parts = list(blame)
    while parts:
        pointer = role_pointer(role, *parts)
        if spec.user_set(pointer):
            return pointer
        parts.pop()
    return role_pointer(role)


def engine_check(when: Callable[[Spec], bool], pointer: str) -> Check:
    def check(spec: Spec) -> Iterator[str]:
        if when(spec):
            yield pointer
    return check


# ------------------------------------------------------------------ shared predicates

def kv(spec: Spec, role: str, *parts: str, default=None):
    return spec.get(role_pointer(role, "kv_cache", *parts), default)


def has_kv(spec: Spec, role: str, *parts: str) -> bool:
    return spec.has(role_pointer(role, "kv_cache", *parts))


def par(spec: Spec, role: str, name: str) -> int:
    return spec.get(role_pointer(role, "parallelism", name), 1)


def backend(spec: Spec) -> str:
    return spec.get("/engine/backend", "vllm")


def disaggregated(spec: Spec) -> bool:
    return spec.get("/engine/mode") == "disaggregated"


def native_mtp(spec: Spec) -> bool:
    return (spec.get("/engine/nextn") or 0) > 0


def speculation(spec: Spec) -> bool:
    return spec.has("/engine/speculation")


def recommend(spec: Spec) -> bool:
    return spec.has("/recommend")


def model_family(spec: Spec) -> str:
    return spec.model.get("family", "")


def architecture(spec: Spec, role: str) -> str:
    return spec.hardware.get(role, {}).get("architecture", "")
