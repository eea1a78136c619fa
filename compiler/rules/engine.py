"""Rules of the engine block: modes and roles, speculation, per-backend scheduler knobs."""
from __future__ import annotations

from ..spec import Spec, role_pointer
from . import Rule, backend, disaggregated, engine_check, native_mtp, role_check, speculation

SECTION_ENGINE = "REFERENCE.md: YAML schema (predict)"


def _roles_in(spec: Spec, *names: str) -> list[str]:
    return [r for r in spec.roles() if r in names]


def _agg_with_pd_roles(spec: Spec):
    if not disaggregated(spec):
        for role in _roles_in(spec, "prefill", "decode"):
            yield role_pointer(role)


def _disagg_roles(spec: Spec):
    if disaggregated(spec):
        for role in _roles_in(spec, "aggregated"):
            yield role_pointer(role)
        missing = [r for r in ("prefill", "decode") if r not in spec.roles()]
        if missing:
            yield "/engine/workers"


def _acceptance_length(spec: Spec):
    rates = spec.get("/engine/speculation/acceptance_rates")
    if rates is not None and len(rates) != spec.get("/engine/speculation/num_speculative_tokens"):
        yield "/engine/speculation/acceptance_rates"


def _nextn_accepted(spec: Spec):
    accepted = spec.get("/engine/nextn_accepted")
    if accepted is not None and accepted > (spec.get("/engine/nextn") or 0):
        yield "/engine/nextn_accepted"


def _context_too_long(spec: Spec):
    from ..catalog import resolve_model

    model, _ = resolve_model(spec.get("/engine/model"))
    context = spec.get("/engine/context_length")
    if model and isinstance(context, int) and context > model.get("max_context", context):
        yield "/engine/context_length"


RULES = (
    Rule("MODE-AGGREGATED-ROLES", SECTION_ENGINE,
         "aggregated mode takes only the `aggregated` worker role",
         "set `engine.mode: disaggregated` or move these settings under `workers.aggregated`",
         _agg_with_pd_roles),
    Rule("MODE-AGGREGATED-KV-TRANSFER", SECTION_ENGINE,
         "`kv_transfer` applies to disaggregated mode only",
         "remove `engine.kv_transfer` or set `engine.mode: disaggregated`",
         engine_check(lambda s: not disaggregated(s) and s.user_set("/engine/kv_transfer"), "/engine/kv_transfer")),
    Rule("MODE-DISAGGREGATED-ROLES", SECTION_ENGINE,
         "disaggregated mode needs exactly the `prefill` and `decode` worker roles",
         "define `workers.prefill` and `workers.decode` and no `workers.aggregated`",
         _disagg_roles),
    Rule("ROLE-HARDWARE-AGGREGATED", SECTION_ENGINE,
         "per-role `hardware` applies to the prefill and decode roles only",
         "set `engine.hardware` instead",
         role_check(lambda s, r: s.has(role_pointer(r, "hardware")), "hardware", roles=("aggregated",))),
    Rule("SPECULATION-BACKEND", SECTION_ENGINE,
         "ngram speculation is modelled for vLLM only",
         "remove `engine.speculation` or use `backend: vllm`",
         engine_check(lambda s: speculation(s) and backend(s) != "vllm", "/engine/speculation")),
    Rule("SPECULATION-WITH-NEXTN", SECTION_ENGINE,
         "ngram speculation cannot be combined with native MTP (`nextn`)",
         "keep either `engine.speculation` or `engine.nextn`",
         engine_check(lambda s: speculation(s) and native_mtp(s), "/engine/speculation")),
    Rule("SPECULATION-ACCEPTANCE-RATES", SECTION_ENGINE,
         "`acceptance_rates` needs one rate per speculative token",
         "give exactly `num_speculative_tokens` rates",
         _acceptance_length),
    Rule("NEXTN-ACCEPTED", SECTION_ENGINE,
         "`nextn_accepted` cannot exceed `nextn` draft tokens",
         "lower `nextn_accepted` or raise `nextn`",
         _nextn_accepted),
    Rule("CONTEXT-LENGTH", SECTION_ENGINE, "`context_length` exceeds the model's maximum context",
         "lower `context_length`, or write `max` for the model's maximum", _context_too_long),
    Rule("SCHEDULER-PREFILL-SCHEDULE-INTERVAL", SECTION_ENGINE,
         "`prefill_schedule_interval` is a vLLM scheduler knob",
         "remove it, or use `prefill_decode_interval` for SGLang",
         role_check(lambda s, r: backend(s) != "vllm" and s.has(role_pointer(r, "scheduler",
                                                                             "prefill_schedule_interval")),
                    "scheduler", "prefill_schedule_interval")),
    Rule("SCHEDULER-PREFILL-DECODE-INTERVAL", SECTION_ENGINE,
         "`prefill_decode_interval` is an SGLang scheduler knob",
         "remove it, or use `prefill_schedule_interval` for vLLM",
         role_check(lambda s, r: backend(s) != "sglang" and s.has(role_pointer(r, "scheduler",
                                                                               "prefill_decode_interval")),
                    "scheduler", "prefill_decode_interval")),
)
