"""`--to dynamo-mocker`: the engine arguments of Dynamo's mocker, a Mooncake trace, and the replay command.

Written next to `-o NAME.json`: `NAME.json`, the mocker's engine arguments (what `--extra-engine-args`
takes: `block_size`, `num_gpu_blocks`, `max_num_seqs`, `max_num_batched_tokens`, `enable_prefix_caching`,
`enable_chunked_prefill`, `dp_size`, `speedup_ratio`); `NAME.jsonl`, the requests as Mooncake rows with one
hash id per engine block (a Mooncake source keeps its own ids and block: `--trace-block-size` says which); `NAME.sh`, the `python -m dynamo.replay`
line that replays the trace on the config's workers through Dynamo's KV router (or round robin), against
the same G1.  The mocker times steps with its own model, so latencies are its own; the cache is kvreplay's.
"""
from __future__ import annotations

import shlex

import orjson

from ..compiler.spec import role_pointer
from . import mooncake_rows
from .carry import Carry, Refusal

NAME = "Dynamo's mocker"
FRONTENDS = ("predict", "replayspec")
ROLE = "aggregated"
NO_FIELD = {
    "/kv_cache/host_offload": "the mocker has no host offload (G2)",
    "/kv_cache/g3_offload": "the mocker has no storage tier (G3)",
    "/kv_cache/kvcr": "the mocker has no peer fetch",
    "/kv_cache/state_cache": "the mocker has no state cache",
    "/kv_cache/groups": "the mocker has one KV cache group",
    "/kv_cache/prefix_match_unit": "the mocker matches whole blocks",
    "/kv_cache/bytes_per_token": "the mocker counts blocks, not bytes",
    "/scaling": "the mocker's workers are fixed",
    "/hardware": "the mocker times steps with its own model",
}
ONE_RANK = ("tensor", "pipeline", "prefill_context", "decode_context", "moe_expert", "moe_tensor")


def engine_args(c: Carry) -> dict:
    if c.take("/engine/mode") != "aggregated":
        raise Refusal("--to dynamo-mocker writes aggregated mocker workers; a disaggregated config is not lowered")
    role = lambda *parts: c.take(role_pointer(ROLE, *parts))  # noqa: E731
    c.drop_each(NO_FIELD, under=role_pointer(ROLE))
    for name in ONE_RANK:
        c.drop(role_pointer(ROLE, "parallelism", name), "a mocker worker has no model parallelism")
    c.drop(role_pointer(ROLE, "timing"), "the mocker times steps with its own model (`speedup_ratio` 1.0)",
           always=True)
    for pointer in ("/engine/model", "/engine/hardware", "/engine/backend_version", "/engine/kvcache_quant_mode"):
        c.drop(pointer, "the mocker counts blocks and times steps with its own model")
    c.drop("/engine/context_length", "the mocker has no context limit (it takes any prompt its blocks hold)")
    backend = c.take("/engine/backend")
    if backend != "vllm":
        c.drop("/engine/backend", f"the mocker schedules as vLLM does, not as {backend}", always=True)
    role("kv_cache", "capacity")
    role("scheduler")
    return {"block_size": role("kv_cache", "block_size"), "num_gpu_blocks": c.spec.geometry[ROLE]["g1_blocks"],
            "max_num_seqs": role("scheduler", "max_sequences"),
            "max_num_batched_tokens": role("scheduler", "max_batched_tokens"),
            "enable_prefix_caching": role("kv_cache", "prefix_caching"),
            "enable_chunked_prefill": c.take("/engine/enable_chunked_prefill"),
            "dp_size": role("parallelism", "attention_data"), "speedup_ratio": 1.0}


def _router(c: Carry) -> str:
    """Dynamo's KV router for kvreplay's KV-aware placement (both route by cached prefix), else round robin."""
    return "kv_router" if c.take("/engine/placement") == "kv_aware" else "round_robin"


def emit(result, c: Carry, output) -> dict:
    if output is None:
        raise Refusal("--to dynamo-mocker writes engine arguments, a trace and a command: give -o NAME.json")
    args = engine_args(c)
    router, workers = _router(c), c.take(role_pointer(ROLE, "parallelism", "replicas"))
    c.take("/engine/kv_eviction_policy")
    c.take("/traffic")
    rows, chunk = mooncake_rows.rows(result, args["block_size"], c)
    trace = output.with_suffix(".jsonl")
    command = ["python", "-m", "dynamo.replay", trace.name, "--trace-format", "mooncake", "--trace-block-size",
               str(chunk), "--replay-mode", "offline", "--router-mode", router, "--num-workers", str(workers)]
    script = (f"# replays {trace.name} on Dynamo's mocker with the engine arguments of {output.name}\n"
              f"cd \"$(dirname \"$0\")\"\n{shlex.join(command)} --extra-engine-args \"$(cat {output.name})\"\n")
    return {output: orjson.dumps(args, option=orjson.OPT_INDENT_2) + b"\n", trace: mooncake_rows.jsonl(rows),
            output.with_suffix(".sh"): script.encode()}
