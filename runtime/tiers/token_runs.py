"""Token runs: a request's tokens as a few (label, start, stop) runs, so prefixes are compared per run, not per token.

A run stands for tokens start..stop-1 of one token stream named by its label:
a synthetic source (token p of source s is a fixed function of (s, p), see
traffic/block_keys.py), a Mooncake trace block id (prefix-chained: equal ids
hold equal tokens), a Mooncake request's own output, or explicit token ids
(a `TokenIds` label, compared by content).  Two runs share their first
min(lengths) tokens when their labels and starts are equal; runs of different
streams share none (a synthetic token equals another source's only past
SOURCE_STRIDE tokens, which no prompt reaches).  SGLang's radix cache with
page size 1 would otherwise cost one step per token of every prompt.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from itertools import accumulate

OPEN_END = 1 << 62  # a `cut` stop past any sequence: the rest of the runs


class TokenIds(bytes):
    """Explicit token ids (u32 bytes) as a run label: runs of two such labels are compared by content."""

    __slots__ = ()

    def __new__(cls, ids) -> "TokenIds":
        return super().__new__(cls, array("I", ids).tobytes())


def spec_runs(spec) -> tuple:
    """Runs of the request's prompt then output (prompt_len + output_len tokens), memoised on the spec."""
    found = spec._keys.get("runs")
    if found is None:
        found = _runs(spec)
        spec._keys["runs"] = found
    return found


def spec_cut(spec, start: int, stop: int) -> tuple:
    """`cut(spec_runs(spec), start, stop)`, the runs found by bisecting their ends (memoised with the runs): a
    request's insert steps past its cached prefix without walking the runs before it."""
    runs = spec_runs(spec)
    ends = spec._keys.get("run_ends")
    if ends is None:
        ends = spec._keys["run_ends"] = list(accumulate(b - a for _, a, b in runs))
    k = bisect_right(ends, start)  # (the run that holds token `start`)
    if k == len(runs):
        return ()
    label, a, b = runs[k]
    a += start - (ends[k - 1] if k else 0)
    if stop >= ends[-1]:
        return ((label, a, b),) + runs[k + 1:]
    j = bisect_left(ends, stop, k)  # (the run that holds token stop - 1)
    if j == k:
        return ((label, a, b - (ends[k] - stop)),) if stop > start else ()
    la, aa, bb = runs[j]
    return ((label, a, b),) + runs[k + 1:j] + ((la, aa, bb - (ends[j] - stop)),)


def _runs(spec) -> tuple:
    content = spec.content
    out = []
    if content.hash_ids:
        size, ids = content.trace_block, content.hash_ids
        full = min(spec.prompt_len // size, len(ids))
        out = [(("h", h), 0, size) for h in ids[:full]]
        if full < len(ids) and spec.prompt_len > full * size:  # (a last, partial block)
            out.append((("h", ids[full]), 0, spec.prompt_len - full * size))
        if spec.output_len:  # a trace request's own output is shared with no one
            out.append((("o", spec.index), 0, spec.output_len))
        return tuple(out)
    if content.token_ids:
        out.append((TokenIds(content.token_ids), 0, len(content.token_ids)))
    out.extend(((source, start, stop) for source, start, stop in content.segments if stop > start))
    return tuple(out)


def cut(runs, start: int, stop: int) -> tuple:
    """The runs of tokens start..stop-1 of `runs`.  Only the runs before `start` and inside the range are walked
    (the rest is one tuple slice), so stepping down a radix path cuts each run once, not once per node."""
    pos, k, count = 0, 0, len(runs)
    while k < count:  # (the run that holds token `start`)
        n = runs[k][2] - runs[k][1]
        if pos + n > start:
            break
        pos += n
        k += 1
    else:
        return ()
    label, a, b = runs[k]
    a += start - pos
    if stop >= OPEN_END:
        return ((label, a, b),) + runs[k + 1:]
    end = pos + (b - runs[k][1])  # (tokens up to the end of run k)
    if end >= stop:
        return ((label, a, b - (end - stop)),) if stop > start else ()
    j = k + 1
    while j < count:  # (the run that holds token stop - 1)
        la, aa, bb = runs[j]
        end += bb - aa
        if end >= stop:
            return ((label, a, b),) + runs[k + 1:j] + ((la, aa, bb - (end - stop)),)
        j += 1
    return ((label, a, b),) + runs[k + 1:]


def drop_tail(runs, tokens: int) -> tuple:
    """`runs` without their last `tokens` tokens (from the end: cheap when a few pages go)."""
    k = len(runs)
    while tokens:
        label, a, b = runs[k - 1]
        if b - a > tokens:
            return runs[:k - 1] + ((label, a, b - tokens),)
        k -= 1
        tokens -= b - a
    return runs[:k]


def page_key(runs, page: int):
    """What names the first `page` tokens of `runs` (a radix node's child key): streams and positions, or the
    ids themselves for explicit tokens."""
    if page == 1 or (runs and runs[0][2] - runs[0][1] >= page):
        label, a, _ = runs[0]
        if isinstance(label, TokenIds):
            return label[4 * a:4 * (a + page)]
        return (label, a)
    return tuple(_ids_piece(r) if isinstance(r[0], TokenIds) else r for r in cut(runs, 0, page))


def _ids_piece(run):
    label, a, b = run
    return bytes(label[4 * a:4 * b])


def shared(a, size: int, b, cap: int):
    """(tokens runs `a` (of `size` tokens) and `b` share, at most `cap` <= size; `b` after all of `a` when they
    share all of it, else None).  A radix path step: most steps pass a whole node whose runs `b` repeats (trace
    blocks), so the runs but the last are compared as one tuple (in C); any other case is `common`'s walk."""
    n = len(a)
    if n <= len(b) and a[:n - 1] == b[:n - 1]:
        la, sa, ea = a[-1]
        lb, sb, eb = b[n - 1]
        if la == lb and sa == sb and eb >= ea:  # (b's run covers a's last: they share all of a)
            if cap < size:
                return cap, None
            return size, (b[n:] if eb == ea else ((lb, ea, eb),) + b[n:])
    return common(a, b, cap), None


def common(a, b, limit: int) -> int:
    """How many leading tokens runs `a` and `b` share, at most `limit`."""
    i = j = 0
    ia = ib = 0  # offsets into a[i], b[j]
    done = 0
    while done < limit and i < len(a) and j < len(b):
        la, sa, ea = a[i]
        lb, sb, eb = b[j]
        sa += ia
        sb += ib
        n = min(ea - sa, eb - sb, limit - done)
        if la == lb and sa == sb:
            same = n
        elif isinstance(la, TokenIds) and isinstance(lb, TokenIds):
            same = _same_ids(la, sa, lb, sb, n)
        else:
            return done
        done += same
        if same < n:
            return done
        ia += same
        ib += same
        if sa + same == ea:
            i, ia = i + 1, 0
        if sb + same == eb:
            j, ib = j + 1, 0
    return done


def _same_ids(la: bytes, sa: int, lb: bytes, sb: int, n: int) -> int:
    """Leading equal ids of two id slices of length n: a binary search of slice comparisons (each in C)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if la[4 * sa:4 * (sa + mid)] == lb[4 * sb:4 * (sb + mid)]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def length(runs) -> int:
    return sum(b - a for _, a, b in runs)
