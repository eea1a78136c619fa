"""The traffic half of AISimulate's execution spec: its load generator's settings, or explicit requests.

Synthetic sources travel as the generator settings `aisimulate predict` passes (`source_type`, `isl`, `osl`,
`load_type`, `request_count`, ...), so AISimulate draws the requests it would draw itself.  A trace travels
as the explicit request list `compile --to replayspec` writes (each row's prompt as token ids standing for
its hash ids), which AISimulate's native ReplaySpec takes as it is.
"""
from __future__ import annotations

from .carry import Carry, Refusal

TRACE_BLOCK = 512  # AISimulate's generator setting for synthetic prompts (it passes 512 whatever the source)


def _load(c: Carry, unit: str) -> dict:
    load = c.take("/traffic/load")
    if load["type"] == "concurrency":
        return {"load_type": "concurrency", "concurrency": load["concurrency"]}
    rate = load.get(f"{unit}s_per_second")
    if load["type"] == "poisson":
        return {"load_type": "poisson", "request_rate": rate, "arrival_seed": load["seed"]}
    return {"load_type": load["type"], "request_rate": rate}


def _count(c: Carry, unit: str) -> dict:
    stop = c.take("/traffic/stop")
    for key in ("requests_per_load_unit", "sessions_per_load_unit"):
        c.drop(f"/traffic/stop/{key}", "the native generator takes a request count, not a count per load unit")
    count = stop.get(unit + "s")
    return {} if count is None else {"request_count": count}


def traffic_block(c: Carry) -> dict | None:
    """AISimulate's generator settings, or None for a trace (whose requests go into the spec)."""
    source = c.take("/traffic/source")
    kind = source["type"]
    if kind == "synthetic":
        out = {"source_type": "synthetic", "isl": source["input_tokens"], "osl": source["output_tokens"],
               "cached_prefix_tokens": source.get("cached_prefix_tokens", 0)}
        unit = "request"
    elif kind == "synthetic-session":
        session = source["session"]
        out = {"source_type": "synthetic-session", "isl": source["new_input_tokens_per_turn"],
               "osl": source["output_tokens_per_turn"], "turns_per_session": session["turns"],
               "inter_turn_delay_ms": session["inter_turn_delay_ms"], "num_prefix_groups": session["prefix_groups"],
               "shared_prefix_ratio": session["shared_prefix_ratio"]}
        unit = "session"
    elif kind in ("trace", "requests"):  # (a ReplaySpec's own requests, or a trace's rows as requests)
        c.take("/traffic/load")
        c.take("/traffic/stop")
        return None
    else:
        raise Refusal(f"a `{kind}` traffic source is not lowered to AISimulate's execution spec")
    return {**out, **_load(c, unit), **_count(c, unit), "trace_block_size": TRACE_BLOCK}


KVREPLAY_ONLY = ("worker_idx", "prefill_worker_idx", "kv_hints")  # request fields the native spec lacks


def requests_of(result, c: Carry) -> list[dict]:
    """A ReplaySpec's requests as written (less kvreplay's extensions), or a trace's rows as requests."""
    if c.spec.get("/traffic/source/type") == "requests":
        listed = c.take("/traffic/source/requests")
        for index, request in enumerate(listed):
            for key in KVREPLAY_ONLY:
                if key in request:
                    c.drop(f"/traffic/source/requests/{index}/{key}", "a kvreplay extension of ReplaySpec requests")
        return [{k: v for k, v in request.items() if k not in KVREPLAY_ONLY} for request in listed]
    from ..lower import lower  # (replays the config once: the arrival times are the trace's)

    return lower(result)["requests"]
