"""Rules of the engine block: modes and roles, speculation, per-backend scheduler knobs."""
from __future__ import annotations

from ..spec import Spec, role_pointer
from .rule import Rule, backend, disaggregated, engine_check, native_mtp, role_check, speculation

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
    accepted, nextn = spec.get("/engine/nextn_accepted"), spec.get("/engine/nextn") or 0
    if (accepted is None) != (nextn == 0) or (accepted is not None and accepted > nextn):
        yield "/engine/nextn_accepted" if accepted is not None else "/engine/nextn"


def _context_too_long(spec: Spec):
    model = spec.model
    context = spec.get("/engine/context_length")
    if isinstance(context, int) and context > model.get("max_context", context):
        yield "/engine/context_length"


ENGINE_CONTROLS = ("kvcache_quant_mode", "nextn")


def _controls_without_default_timing(spec: Spec):
    controls = [k for k in ENGINE_CONTROLS if spec.user_set(f"/engine/{k}") and spec.get(f"/engine/{k}") not in
                (0, "auto")]
    for role in spec.roles():
        if controls and spec.get(role_pointer(role, "timing", "type")) != "default":
            yield role_pointer(role, "timing", "type")


def _moe_width(spec: Spec):
    if not spec.model.get("num_experts"):
        return
    for role in spec.roles():
        par = lambda k: spec.get(role_pointer(role, "parallelism", k), 1)  # noqa: E731
        if par("moe_tensor") * par("moe_expert") != par("tensor") * par("attention_data"):
            yield role_pointer(role, "parallelism")


def _scaling_order(spec: Spec):
    for role in spec.roles():
        steps = spec.get(role_pointer(role, "scaling")) or ()
        times = [step["at_seconds"] for step in steps]
        if any(b <= a for a, b in zip(times, times[1:])):
            yield role_pointer(role, "scaling")


def _tensor_heads(spec: Spec):
    heads = spec.model.get("num_attention_heads")
    for role in spec.roles():
        if heads and heads % spec.get(role_pointer(role, "parallelism", "tensor"), 1):
            yield role_pointer(role, "parallelism", "tensor")


def _decode_context(spec: Spec):
    for role in spec.roles():
        context = spec.get(role_pointer(role, "parallelism", "decode_context"), 1)
        if spec.get(role_pointer(role, "parallelism", "tensor"), 1) % context:
            yield role_pointer(role, "parallelism", "decode_context")


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
         engine_check(lambda s: speculation(s) and backend(s) != "vllm", "/engine/speculation"),
         related=(("`backend: {value}` is chosen here", "/engine/backend"),)),
    Rule("SPECULATION-WITH-NEXTN", SECTION_ENGINE,
         "ngram speculation cannot be combined with native MTP (`nextn`)",
         "keep either `engine.speculation` or `engine.nextn`",
         engine_check(lambda s: speculation(s) and native_mtp(s), "/engine/speculation"),
         related=(("native MTP is set here (`nextn: {value}`)", "/engine/nextn"),)),
    Rule("SPECULATION-ACCEPTANCE-RATES", SECTION_ENGINE,
         "`acceptance_rates` needs one rate per speculative token",
         "give exactly `num_speculative_tokens` rates",
         _acceptance_length),
    Rule("NEXTN-ACCEPTED", SECTION_ENGINE,
         "`nextn_accepted` (mean accepted draft tokens) is required when `nextn` > 0, and at most `nextn`",
         "set `nextn_accepted` between 0 and `nextn`, or remove it when `nextn` is 0",
         _nextn_accepted),
    Rule("TIMING-ENGINE-CONTROLS", SECTION_ENGINE, "`engine.kvcache_quant_mode` and `engine.nextn` shape the "
         "step-time model and need `timing.type: default` in every role",
         "use the default timing, or drop the engine control", _controls_without_default_timing),
    Rule("PARALLEL-MOE-WIDTH", SECTION_ENGINE, "for a MoE model `moe_tensor x moe_expert` must equal "
         "`tensor x attention_data`", "e.g. `tensor: 8, moe_expert: 8` (or `moe_tensor: 8`)", _moe_width),
    Rule("SCALING-ORDER", SECTION_ENGINE, "`scaling` steps must be in strictly increasing time order",
         "sort the steps by `at_seconds` and merge steps at the same time", _scaling_order),
    Rule("PARALLEL-TENSOR-HEADS", SECTION_ENGINE, "`tensor` must divide the model's attention heads (vLLM, "
         "SGLang and TensorRT-LLM split the heads evenly over the tensor-parallel ranks)",
         "pick a divisor of the model's `num_attention_heads` (`kvreplay explain` shows the model)", _tensor_heads),
    Rule("PARALLEL-DECODE-CONTEXT", SECTION_ENGINE, "`decode_context` must divide `tensor`",
         "pick a divisor of `tensor`", _decode_context),
    Rule("SGLANG-CHUNKED-PREFILL", SECTION_ENGINE, "SGLang always chunks prefill; `enable_chunked_prefill: false` "
         "is not supported", "remove `enable_chunked_prefill` or use vLLM",
         engine_check(lambda s: backend(s) == "sglang" and s.get("/engine/enable_chunked_prefill") is False,
                      "/engine/enable_chunked_prefill"),
         related=(("`backend: {value}` is chosen here", "/engine/backend"),)),
    Rule("CONTEXT-LENGTH", SECTION_ENGINE, "`context_length` exceeds the model's maximum context",
         "lower `context_length`, or write `max` for the model's maximum", _context_too_long),
    Rule("SCHEDULER-PREFILL-SCHEDULE-INTERVAL", SECTION_ENGINE,
         "`prefill_schedule_interval` is a vLLM scheduler knob; other backends leave it at 1",
         "remove it, or use `prefill_decode_interval` for SGLang",
         role_check(lambda s, r: backend(s) != "vllm"
                    and s.get(role_pointer(r, "scheduler", "prefill_schedule_interval"), 1) != 1,
                    "scheduler", "prefill_schedule_interval")),
    Rule("SCHEDULER-PREFILL-DECODE-INTERVAL", SECTION_ENGINE,
         "`prefill_decode_interval` is an SGLang scheduler knob; other backends leave it at 0",
         "remove it, or use `prefill_schedule_interval` for vLLM",
         role_check(lambda s, r: backend(s) != "sglang"
                    and s.get(role_pointer(r, "scheduler", "prefill_decode_interval"), 0) != 0,
                    "scheduler", "prefill_decode_interval")),
    Rule("HOST-LOOP-BACKEND", SECTION_ENGINE,
         "`host_loop` (the overlap scheduler) is modelled for SGLang only",
         "remove it, or use `backend: sglang`",
         role_check(lambda s, r: backend(s) != "sglang" and s.get(role_pointer(r, "host_loop"), False),
                    "host_loop")),
    Rule("HOST-LOOP-DECODE", SECTION_ENGINE,
         "`host_loop` is not modelled on the decode role (AISimulate: not on a decode rank)",
         "set it on `workers.prefill` only",
         role_check(lambda s, r: s.get(role_pointer(r, "host_loop"), False), "host_loop", roles=("decode",))),
    Rule("SCHEDULER-SCHEDULE-POLICY", SECTION_ENGINE,
         "`schedule_policy` is an SGLang scheduler knob; other backends schedule in arrival order",
         "remove it, or use `backend: sglang`",
         role_check(lambda s, r: backend(s) != "sglang"
                    and s.get(role_pointer(r, "scheduler", "schedule_policy"), "fcfs") != "fcfs",
                    "scheduler", "schedule_policy")),
)
