"""Rules of opal JSON configs (spec/opal-reference.md, "Validation"): where opal crashes or ignores, kvreplay reports.

All of them are ``frontend`` rules: the opal front-end runs them on the opal document itself (every
default applied, pointers such as `/worker/vllm_params/block_size`), after its schema and before
lowering, so they blame what the user wrote.  The front-end reads the model's `config.json` first and
passes what it found as `spec.model` (opal's numbers, or `problem`).  A check may yield a pointer or
``(pointer, details)``; an `OpalRule` formats its message and hint with the details (the field's
name, the path tried, the smallest memory that works).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Iterator

from ..diagnostics import Diagnostic, join_pointer
from ..frontends.opal.formulas import blocks_needed, smallest_memory_gb, total_gpu_blocks
from ..frontends.opal.names import POLICIES, STAGE_TYPES, TIERS, policy_name
from ..spec import Spec
from .rule import Rule

SECTION = "opal-reference.md: Validation"
FRONTEND = "frontend"


@dataclass(frozen=True)
class OpalRule(Rule):
    """A rule whose diagnostics fill its `template` and `hint_template` with what the check found (`message` and
    `hint` are the same sentences for the rule table, with ``<name>`` where a detail goes)."""

    template: str = ""
    hint_template: str = ""

    def diagnostics(self, spec: Spec) -> Iterator[Diagnostic]:
        for found in self.check(spec):
            pointer, details = found if isinstance(found, tuple) else (found, {})
            details = {"field": pointer.rsplit("/", 1)[-1], **details}
            yield Diagnostic(self.id, pointer, self.template.format(**details), self.hint_template.format(**details),
                             at_key=True, section=self.section)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tier_sections(spec: Spec) -> Iterator[tuple[str, dict]]:
    for tier in TIERS:
        if spec.has(f"/kvc/{tier}"):
            yield tier, spec.get(f"/kvc/{tier}")


def _positive_fields(spec: Spec) -> Iterator[str]:
    yield "/worker/hw/memory_gb"
    yield "/worker/vllm_params/block_size"
    yield "/kvc/chunk_size"
    for tier, _ in _tier_sections(spec):
        for key in ("bandwidth_GBps", "capacity_GB", "concurrency"):
            yield f"/kvc/{tier}/{key}"
    for i, stage in enumerate(spec.get("/workload/stages") or ()):
        if stage.get("type") == "trace":
            yield join_pointer("workload", "stages", i, "workload_params", "chunk_size")


def _not_positive(spec: Spec):
    for pointer in _positive_fields(spec):
        value = spec.get(pointer)
        if _number(value) and value <= 0:
            yield pointer


def _thresholds(spec: Spec):
    for pointer in ("/worker/vllm_params/hbm_eviction_threshold", "/worker/vllm_params/gpu_memory_utilization"):
        value = spec.get(pointer)
        if _number(value) and not 0 < value <= 1:
            yield pointer


def _negative_ttl(spec: Spec):
    if spec.get("/worker/vllm_params/apc_lru_ttl", 0) < 0:
        yield "/worker/vllm_params/apc_lru_ttl"


def _intervals(spec: Spec):
    for pointer in ("/worker/vllm_params/apc_eviction_check_interval_sec",
                    "/router/router_params/periodic_infra_update_collection_time",
                    "/worker/worker_params/periodic_infra_update_time"):
        if spec.get(pointer, 1) <= 0:
            yield pointer


def _simulation_time(spec: Spec):
    value = spec.get("/simulation/simulation_time", -1)
    if value != -1 and value <= 0:
        yield "/simulation/simulation_time"


def _counts(spec: Spec):
    for i, stage in enumerate(spec.get("/workload/stages") or ()):
        params = stage.get("workload_params") or {}
        for key in ("total_requests", "max_concurrent_sessions"):
            if stage.get("type") in ("trace", "otel") and params.get(key) == 0:
                yield join_pointer("workload", "stages", i, "workload_params", key)


def _ranges(spec: Spec):
    for i, stage in enumerate(spec.get("/workload/stages") or ()):
        params = stage.get("workload_params") or {}
        for low, high in (("prompt_size_min", "prompt_size_max"), ("output_tokens_min", "output_tokens_max")):
            if _number(params.get(low)) and _number(params.get(high)) and params[low] > params[high]:
                yield join_pointer("workload", "stages", i, "workload_params", low), {"high": high}


def _max_workers(spec: Spec):
    if spec.get("/router/router_params/enable_scaling") and \
            spec.get("/router/router_params/max_workers") < spec.get("/simulation/num_workers"):
        yield "/router/router_params/max_workers"


def _apc_policy(spec: Spec):
    if str(spec.get("/worker/vllm_params/apc_eviction_policy", "lru")).lower() != "lru":
        yield "/worker/vllm_params/apc_eviction_policy"


def _unknown_tiers(spec: Spec):
    seen = set()
    for i, name in enumerate(spec.get("/kvc/kvc_tiers") or ()):
        if name not in TIERS or name in seen:
            close = difflib.get_close_matches(str(name), TIERS, n=1, cutoff=0.5)
            suggestion = f"did you mean `{close[0]}`? " if close and name not in seen else ""
            yield f"/kvc/kvc_tiers/{i}", {"name": name, "suggestion": suggestion,
                                          "why": "is listed twice" if name in seen else "is not a tier"}
        seen.add(name)


def _tiers_without_section(spec: Spec):
    for i, name in enumerate(spec.get("/kvc/kvc_tiers") or ()):
        if name in TIERS and not spec.has(f"/kvc/{name}"):
            yield f"/kvc/kvc_tiers/{i}", {"name": name}


def _model_config(spec: Spec):
    if spec.model.get("problem"):
        yield "/model/model_params/name", {"problem": spec.model["problem"]}


def _routing_policy(spec: Spec):
    written = spec.get("/router/router_params/policy")
    if policy_name(written) is None:
        close = difflib.get_close_matches(str(written), POLICIES, n=1, cutoff=0.5)
        yield "/router/router_params/policy", {"name": written,
                                               "suggestion": f"did you mean `{close[0]}`? " if close else ""}


def _stage_types(spec: Spec):
    for i, stage in enumerate(spec.get("/workload/stages") or ()):
        if stage.get("type") not in STAGE_TYPES:
            close = difflib.get_close_matches(str(stage.get("type")), STAGE_TYPES, n=1, cutoff=0.5)
            yield join_pointer("workload", "stages", i, "type"), {
                "name": stage.get("type"), "suggestion": f"did you mean `{close[0]}`? " if close else ""}


def _raw_otel(spec: Spec):
    for i, stage in enumerate(spec.get("/workload/stages") or ()):
        if stage.get("type") == "otel" and not (stage.get("workload_params") or {}).get("pretokenized"):
            yield join_pointer("workload", "stages", i, "workload_params", "pretokenized")


def _inference_model(spec: Spec):
    if spec.get("/worker/inference_params/model", "roofline") != "roofline":
        yield "/worker/inference_params/model", {"name": spec.get("/worker/inference_params/model")}


def _gpu_too_small(spec: Spec):
    model, block_size = spec.model, spec.get("/worker/vllm_params/block_size")
    memory, tp = spec.get("/worker/hw/memory_gb"), spec.get("/worker/hw/tp", 1)
    if model.get("problem") or not (block_size > 0 and memory > 0):
        return
    positions = model.get("max_position_embeddings") or 1  # (unknown: the pool must hold one block at least)
    needed = blocks_needed(positions, block_size)
    blocks = total_gpu_blocks(memory, tp, model["model_bytes"], block_size, model["kv_bytes_per_token"])
    if blocks < needed:
        smallest = smallest_memory_gb(needed, tp, model["model_bytes"], block_size, model["kv_bytes_per_token"])
        yield "/worker/hw/memory_gb", {"blocks": blocks, "needed": needed, "smallest": f"{smallest:g}",
                                       "positions": positions, "block_size": block_size}


def _table(text: str) -> str:
    return re.sub(r"\{(\w+)\}", r"<\1>", text).replace("<suggestion>", "")


def _rule(rule_id: str, message: str, hint: str, check, summary: str = "") -> OpalRule:
    return OpalRule(rule_id, SECTION, summary or _table(message), _table(hint), check, stage=FRONTEND,
                    template=message, hint_template=hint)


RULES = (
    _rule("OPAL-APC-EVICTION-POLICY", "`apc_eviction_policy` must be `lru` (opal raises `Unknown APC eviction policy`)",
          "write \"lru\", the only APC eviction policy", _apc_policy),
    _rule("OPAL-KVC-TIER", "`{name}` {why}: the KVC tiers are CPUMemory, LocalNVMe and DistributedFS",
          "{suggestion}list each tier once, fastest first", _unknown_tiers),
    _rule("OPAL-KVC-TIER-SECTION", "the tier `{name}` is listed but `kvc` has no `{name}` section",
          "add `kvc.{name}` with bandwidth_GBps, latency_nsec, concurrency and capacity_GB, or remove it from "
          "`kvc_tiers`", _tiers_without_section),
    _rule("OPAL-MODEL-CONFIG", "{problem}",
          "the model is <config_dir>/<name>/config.json (a Hugging Face config), relative to the config's folder "
          "or the working directory", _model_config, summary="the model's config.json is missing or unusable"),
    _rule("OPAL-NOT-POSITIVE", "`{field}` must be greater than 0", "give a positive value", _not_positive),
    _rule("OPAL-THRESHOLD", "`{field}` must be in (0, 1]", "give a fraction greater than 0 and at most 1",
          _thresholds),
    _rule("OPAL-TTL", "`apc_lru_ttl` must not be negative", "give 0 (no TTL) or a positive number of seconds",
          _negative_ttl),
    _rule("OPAL-INTERVAL", "`{field}` must be greater than 0 seconds", "give a positive interval in seconds",
          _intervals),
    _rule("OPAL-SIMULATION-TIME", "`simulation_time` must be -1 (until done) or greater than 0 seconds",
          "write -1, or a positive number of seconds", _simulation_time),
    _rule("OPAL-COUNT", "`{field}` must be -1 (all) or greater than 0", "write -1, or a positive count", _counts),
    _rule("OPAL-STAGE-RANGE", "`{field}` is larger than `{high}`", "make the minimum at most the maximum", _ranges),
    _rule("OPAL-MAX-WORKERS", "with `enable_scaling`, `max_workers` must be at least `simulation.num_workers`",
          "raise `max_workers` to the number of workers scaling may reach", _max_workers),
    _rule("OPAL-ROUTING-POLICY", "unknown routing policy `{name}`",
          "{suggestion}policies: RoundRobin, LeastLoaded, Random, MaxPrefix (case-insensitive)", _routing_policy),
    _rule("OPAL-STAGE-TYPE", "unknown stage type `{name}`",
          "{suggestion}stage types: UniformReqRate, ExponentialReqRate, trace, otel", _stage_types),
    _rule("OPAL-OTEL-TOKENIZER", "raw OTel spans (`pretokenized: false`) need a tokenizer, and none is available "
          "offline", "use the pretokenized file (turns with hash_ids and output_token_ids) and set "
          "`pretokenized: true`", _raw_otel),
    _rule("OPAL-INFERENCE-MODEL", "inference model `{name}` is not supported: kvreplay times steps with the roofline "
          "of `worker.hw`", "write \"roofline\" (or leave `model` out)", _inference_model),
    _rule("OPAL-GPU-TOO-SMALL", "the GPU pool holds {blocks} blocks, fewer than the {needed} one full-length request "
          "needs (ceil({positions} / block_size {block_size})); opal and vLLM refuse to start",
          "use `memory_gb` of at least {smallest} (or a larger tp, or a smaller model)", _gpu_too_small),
)
