"""The search space of a recommend config: which knobs are searched, over which values, in which order.

A domain is written either in `recommend.search` (a dotted path -> a list, or a range such as
`"0.80..0.95 step 0.05"` read with grammar/search.lark) or in place, at the knob itself:
`block_size: {search: [16, 32, 64]}`. In-place domains are hoisted into `recommend.search`, so the
compiler's recommend rules (compiler/rules/recommend_mode.py) judge every searched path, whichever way
it was written. Candidates are the Cartesian product of the domains, paths sorted, so a candidate's
index depends only on the space, never on dict or completion order.

A role whose `parallelism.preset` is `true` has its shape searched over the built-in worker-size ladder
(AISimulate's default parallelism preset: 1, 2, 4, 8 and 16 GPUs of tensor parallelism, pipeline 1, the
role's other parallelism knobs kept, a MoE model's experts over all of the worker's GPUs); shapes the model
cannot take are listed with their rule errors like
any invalid candidate, and `recommend.max_gpus` leaves out deployments over the budget.
"""
from __future__ import annotations

import copy
import itertools
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from importlib.resources import files

MAX_CANDIDATES = 100_000  # a product larger than this is surely a typo in a range step
LADDER = (1, 2, 4, 8, 16)  # GPUs per worker of the built-in parallelism preset (tensor parallel, pipeline 1)


class SpaceError(ValueError):
    """The search block cannot be read as domains."""


@lru_cache(maxsize=1)
def _parser():
    from lark import Lark

    return Lark(files("kvreplay.grammar").joinpath("search.lark").read_text(), parser="lalr")


def parse_range(text: str, path: str) -> list:
    """`LOW..HIGH step STEP` as its values; integers stay integers, decimals are exact (0.85, not 0.8500001)."""
    from lark.exceptions import LarkError

    try:
        low, high, step = (Decimal(str(token)) for token in _parser().parse(text).children)
    except (LarkError, InvalidOperation):
        raise SpaceError(f"recommend.search {path}: {text!r} is not a list or a range `LOW..HIGH step STEP`") from None
    if step <= 0 or high < low:
        raise SpaceError(f"recommend.search {path}: {text!r} needs LOW <= HIGH and a positive STEP")
    count = int((high - low) / step) + 1
    if count > MAX_CANDIDATES:
        raise SpaceError(f"recommend.search {path}: {text!r} has {count} values")
    integral = all(value == value.to_integral_value() for value in (low, step))
    values = [low + i * step for i in range(count)]
    return [int(v) if integral else float(v) for v in values]


def domain(value, path: str) -> list:
    if isinstance(value, list):
        if not value:
            raise SpaceError(f"recommend.search {path}: the domain is empty")
        return value
    if isinstance(value, str):
        return parse_range(value, path)
    raise SpaceError(f"recommend.search {path}: a domain is a list or a range string, not {value!r}")


def _hoist(node, path: tuple[str, ...], found: dict) -> None:
    """Replace each in-place `{search: DOMAIN}` under `node` by its first value, recording its domain."""
    if not isinstance(node, dict):
        return
    for key in list(node):
        value = node[key]
        if isinstance(value, dict) and list(value) == ["search"]:
            dotted = ".".join(path + (str(key),))
            found[dotted] = domain(value["search"], dotted)
            node[key] = found[dotted][0]
        else:
            _hoist(value, path + (str(key),), found)


def extract(document: dict) -> tuple[dict, dict[str, list]]:
    """(the document with every domain concrete and listed in `recommend.search`, path -> values)."""
    document = copy.deepcopy(document)
    block = document.get("recommend")
    if not isinstance(block, dict):
        raise SpaceError("the config has no `recommend` block (write `recommend: {search: {...}}`)")
    found: dict[str, list] = {}
    _hoist({k: v for k, v in document.items() if k != "recommend"}, (), found)
    for path, value in (block.get("search") or {}).items():
        if path in found:
            raise SpaceError(f"recommend.search {path}: searched both in place and in recommend.search")
        found[path] = domain(value, path)
    _ladders(document, found)
    if not found:
        raise SpaceError("recommend.search names no knob to search")
    block["search"] = {path: found[path] for path in sorted(found)}
    return document, block["search"]


def _ladders(document: dict, found: dict) -> None:
    """Add the ladder domain of every role with `parallelism.preset: true` (a preset and a search of the same
    shape cannot both be active)."""
    workers = (document.get("engine") or {}).get("workers") or {}
    for role in sorted(workers):
        parallelism = (workers[role] or {}).get("parallelism") if isinstance(workers[role], dict) else None
        if not isinstance(parallelism, dict) or parallelism.get("preset") is not True:
            continue
        path = f"engine.workers.{role}.parallelism"
        clash = sorted(p for p in found if p == path or p.startswith(path + "."))
        if clash:
            raise SpaceError(f"{path}.preset: true searches the shape itself; it cannot be combined with a search "
                             f"of {clash[0]} (set `preset: false` to search knobs independently)")
        base = {k: v for k, v in parallelism.items() if k not in ("preset", "tensor", "pipeline")}
        found[path] = [{**base, "tensor": size, "pipeline": 1, **_experts(document, base, size)} for size in LADDER]


def _experts(document: dict, base: dict, size: int) -> dict:
    """A MoE model's experts spread over every GPU of the worker (expert parallel: moe_expert = tensor x
    attention_data, moe_tensor 1), the widths its rule requires; nothing for a dense model or an unknown one
    (whose name the compiler then reports)."""
    from ..compiler.catalog import resolve_model

    model, _ = resolve_model((document.get("engine") or {}).get("model"))
    if not model or not model.get("num_experts"):
        return {}
    return {"moe_tensor": 1, "moe_expert": size * base.get("attention_data", 1)}


def candidates(space: dict[str, list]) -> list[dict]:
    """Every combination, the last sorted path varying fastest."""
    paths = sorted(space)
    total = 1
    for path in paths:
        total *= len(space[path])
    if total > MAX_CANDIDATES:
        raise SpaceError(f"the search space has {total:,} candidates (at most {MAX_CANDIDATES:,})")
    return [dict(zip(paths, values)) for values in itertools.product(*(space[p] for p in paths))]


def apply(document: dict, knobs: dict) -> dict:
    """The document with each dotted path set to the candidate's value (a map replaces a whole block)."""
    document = copy.deepcopy(document)
    for path, value in knobs.items():
        node = document
        *parents, last = path.split(".")
        for key in parents:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[last] = copy.deepcopy(value)
    return document
