"""Immutable JSON records for long request lists.

`frozen_json` builds immutable list/dict records that pyrsistent's freeze/thaw
pass through untouched and orjson writes natively, so a 10,000-request list is
not copied pass after pass.  (The requests' fast schema check is `schema_fast`.)
"""
from __future__ import annotations

from typing import Any

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


def frozen_json(value: Any) -> Any:
    """A JSON value as FrozenDict / FrozenList all the way down."""
    if isinstance(value, dict):
        return FrozenDict({k: frozen_json(v) for k, v in value.items()})
    if isinstance(value, list):
        if set(map(type, value)) <= _SCALARS:
            return FrozenList(value)
        return FrozenList(map(frozen_json, value))
    return value
