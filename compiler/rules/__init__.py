"""Rules as data: every Rules / Supported / Rejected sentence of the spec is one `Rule`.

A rule has a stable id, the spec section it comes from, the stage it needs
(``spec``: after defaults; ``geometry``: after sizes are inferred), a message
and a hint, and a `check` that yields the pointers it blames.  The modules of
this package each hold the rules of one spec section; `ALL_RULES` is their
concatenation in a fixed order, and ids are unique (checked at import).
"""
from __future__ import annotations

from .rule import Rule


def _collect() -> tuple[Rule, ...]:
    from . import (engine, floors, g1, g3, host_offload, kvcr, opal, other_modes, recommend_mode, replayspec,
                   state_cache, traffic)

    rules = (*engine.RULES, *traffic.RULES, *g1.RULES, *host_offload.RULES, *g3.RULES, *kvcr.RULES,
             *state_cache.RULES, *other_modes.RULES, *recommend_mode.RULES, *replayspec.RULES, *opal.RULES,
             *floors.RULES)
    ids = [r.id for r in rules]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise RuntimeError(f"duplicate rule ids: {duplicated}")
    return rules


ALL_RULES: tuple[Rule, ...] = ()


def all_rules() -> tuple[Rule, ...]:
    global ALL_RULES
    if not ALL_RULES:
        ALL_RULES = _collect()
    return ALL_RULES
