"""A config's traffic as Mooncake rows: what `--to opal`, `--to predict` and `--to dynamo-mocker` write as a trace.

The traffic is replayed once (as `compile --to replayspec` does), so every request keeps the arrival time it
had: a trace's or a rate's own, or, for closed loops and session turns, the time the loop produced.  A row's
`hash_ids` name its prompt's chunks: a Mooncake row keeps its own ids (and chunk size); any other prompt is cut
into `chunk` tokens and each chunk is numbered by its whole prefix (same prefix, same id), so the rows share
exactly the prefixes the requests shared, at chunk granularity.
"""
from __future__ import annotations

from ..lower import prompt_tokens
from ..runtime.build import build

MS = 1e6


def replayed(result) -> list:
    """The requests of one replay of the compiled config, in the order they were made."""
    replay = build(result.plan.records)
    replay.run()
    return sorted(replay.requests, key=lambda r: r.spec.index)


def rows(result, chunk: int, c=None) -> tuple[list[dict], int]:
    """(rows sorted by timestamp in ms, the tokens one hash id stands for); a closed loop's arrival times are
    said in the ledger `c`, when given."""
    if c is not None and (c.spec.get("/traffic/load/type") == "concurrency"
                          or c.spec.get("/traffic/source/type") == "synthetic-session"):
        c.drop("/traffic/load", "a trace holds arrival times: the closed loop is written as the times kvreplay's "
               "replay gave its requests", always=True)
    requests = replayed(result)
    traced = [r.spec.content.trace_block for r in requests if r.spec.content.hash_ids]
    if traced and len(traced) == len(requests) and len(set(traced)) == 1:
        chunk = traced[0]
    ids: dict[tuple, int] = {}
    out = []
    for request in requests:
        spec = request.spec
        if chunk == spec.content.trace_block and spec.content.hash_ids:
            hash_ids = list(spec.content.hash_ids)
        else:
            tokens = prompt_tokens(spec)[:spec.prompt_len]
            hash_ids, parent = [], -1
            for start in range(0, spec.prompt_len, chunk):
                parent = ids.setdefault((parent, tuple(tokens[start:start + chunk])), len(ids))
                hash_ids.append(parent)
        out.append({"timestamp": request.arrival_ns / MS, "input_length": spec.prompt_len,
                    "output_length": spec.output_len, "hash_ids": hash_ids})
    out.sort(key=lambda row: row["timestamp"])
    return out, chunk


def jsonl(rows_: list[dict]) -> bytes:
    import orjson

    return b"".join(orjson.dumps(row) + b"\n" for row in rows_)
