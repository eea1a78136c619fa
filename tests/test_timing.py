"""Step-time providers: exact fixed and polynomial times, the roofline's calibration and shape."""
from __future__ import annotations

import pytest

from kvreplay.compiler.catalog import resolve_hardware, resolve_model
from kvreplay.compiler.durations import ms_to_ns
from kvreplay.compiler.timing_inputs import active_params, roofline_record, timing_record
from kvreplay.runtime.timing import PassWork
from kvreplay.runtime.timing.default import default_timing as roofline_of
from kvreplay.runtime.timing.factory import make_timing
from kvreplay.runtime.timing.polynomial import polynomial_timing as polynomial_of

from .support import EXAMPLES, compile_yaml

EMPTY = PassWork()
PREFILL = PassWork(prefill_chunks=((100, 0), (28, 500)))  # 128 new tokens
DECODE = PassWork(decode_requests=3, decode_context=3000)
MIXED = PassWork(prefill_chunks=((100, 0), (28, 500)), decode_requests=3, decode_context=3000)


def record(name: str, table=resolve_model) -> dict:
    value, problem = table(name)
    assert problem is None
    return value


H200 = record("h200_sxm", resolve_hardware)


def ms(timing, work: PassWork) -> float:
    return timing(work) / 1e6


def chunk(new: int, cached: int = 0) -> PassWork:
    return PassWork(prefill_chunks=((new, cached),))


def decode(requests: int, context_each: int) -> PassWork:
    return PassWork(decode_requests=requests, decode_context=requests * context_each)


def fixed_timing(prefill_ms: float, decode_ms: float):
    """The fixed provider of a role's `timing: {type: fixed}` in ms, as the compiler resolves it."""
    return make_timing(timing_record({"timing": {"type": "fixed", "prefill_ms": prefill_ms, "decode_ms": decode_ms}},
                                     {}, {}, "vllm", "bfloat16"))


def polynomial_timing(prefill, decode, prefill_variable="tokens", decode_variable="batch_size"):
    """The polynomial provider of ms coefficients, as the compiler resolves them."""
    timing = {"type": "polynomial", "prefill": prefill, "decode": decode, "prefill_variable": prefill_variable,
              "decode_variable": decode_variable}
    return polynomial_of(timing_record({"timing": timing}, {}, {}, "vllm", "bfloat16"))


def default_timing(model: dict, hardware: dict, backend: str, tensor: int, kv_dtype_bytes: int):
    return roofline_of(roofline_record(model, hardware, backend, tensor, kv_dtype_bytes))


def make_role_timing(role: dict, model: dict, hardware: dict, backend: str, kv_dtype: str):
    return make_timing(timing_record(role, model, hardware, backend, kv_dtype))


def roofline(model: str, tensor: int = 1, kv_bytes: int | None = None):
    m = record(model)
    return default_timing(m, H200, "vllm", tensor, kv_bytes or (1 if m["weight_dtype"] == "fp8" else 2))


# --- fixed -----------------------------------------------------------------

def test_fixed_phases_sum_and_empty():
    timing = fixed_timing(40.0, 12.0)
    assert [timing(w) for w in (EMPTY, PREFILL, DECODE, MIXED)] == [0, 40_000_000, 12_000_000, 52_000_000]


def test_fixed_is_exact_decimal_with_half_even():
    assert fixed_timing(0.1, 0.3)(MIXED) == 400_000
    assert ms_to_ns(0.0001255) == 126  # exact 125.5 ns -> even; the float product 125.49999999999999 would give 125
    assert ms_to_ns(1e-6) == 1
    assert ms_to_ns(0.0000005) == 0 and ms_to_ns(0.0000015) == 2 and ms_to_ns(0.0000025) == 2
    assert fixed_timing(0.0, 0.0)(MIXED) == 0


# --- polynomial ------------------------------------------------------------

def test_polynomial_default_variables():
    timing = polynomial_timing([1.0, 0.01, 0.0001], [2.0, 0.5])
    prefill = 1_000_000 + 1_280_000 + 1_638_400  # x = 128 tokens
    decode_ns = 2_000_000 + 1_500_000  # x = 3 requests
    assert [timing(w) for w in (EMPTY, PREFILL, DECODE, MIXED)] == [0, prefill, decode_ns, prefill + decode_ns]


def test_polynomial_alternative_variables():
    timing = polynomial_timing([0.0, 0.1], [1.0, 0.001], "batch_tokens", "context_tokens")
    assert timing(PREFILL) == 12_800_000  # 128 tokens, no decoders
    assert timing(DECODE) == 1_000_000 + 3_000_000  # context 3000
    assert timing(MIXED) == 13_100_000 + 4_000_000  # prefill x = 128 + 3


def test_polynomial_clamps_each_phase_at_zero_and_rounds_half_even():
    timing = polynomial_timing([-5.0], [1.0])
    assert timing(PREFILL) == 0 and timing(MIXED) == 1_000_000
    # 0.0000005 ms = 0.5 ns -> 0; 0.0000015 ms = 1.5 ns -> 2; x = 3: 4.5 ns -> 4
    assert polynomial_timing([0.0000005], [0.0000015])(MIXED) == 2
    assert polynomial_timing([1.0], [0.0, 0.0000015])(DECODE) == 4


def test_polynomial_rejects_unknown_variable():
    with pytest.raises(ValueError):
        polynomial_timing([1.0], [1.0], prefill_variable="requests")


# --- default (roofline) ----------------------------------------------------

QWEN = "Qwen/Qwen3-32B-FP8"
LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("model, passes, target_ms", [
    (QWEN, [chunk(1024)], 66.0),
    (QWEN, [chunk(8192), chunk(8192, 8192)], 1309.0),  # 16k prompt in two 8192-token chunks
    (QWEN, [decode(1, 1024)], 14.2),
    (QWEN, [decode(1, 16384)], 14.9),
    (LLAMA8, [chunk(1024)], 21.0),
    (LLAMA8, [decode(1, 1024)], 4.9),
], ids=["qwen32-fp8-ttft-1k", "qwen32-fp8-ttft-16k", "qwen32-fp8-decode-1k", "qwen32-fp8-decode-16k",
        "llama8-ttft-1k", "llama8-decode-1k"])
def test_default_matches_calibration_within_25_percent(model, passes, target_ms):
    timing = roofline(model)
    ours = sum(ms(timing, p) for p in passes)
    assert abs(ours / target_ms - 1) <= 0.25, (ours, target_ms)


@pytest.mark.parametrize("model", [QWEN, LLAMA8, "Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3"])
def test_default_is_monotone(model):
    timing = roofline(model, tensor=8 if "DeepSeek" in model else 1)
    prefill = [timing(chunk(n)) for n in (1, 16, 256, 1024, 4096, 8192)]
    cached = [timing(chunk(1024, c)) for c in (0, 1024, 8192, 32768)]
    context = [timing(decode(8, c)) for c in (128, 1024, 8192, 32768)]
    batch = [timing(decode(b, 1024)) for b in (1, 2, 8, 64, 256)]
    for series in (prefill, cached, context, batch):
        assert series == sorted(series) and len(set(series)) == len(series), series
    assert timing(EMPTY) == 0


def test_tensor_parallel_speeds_up_llama_70b_prefill():
    tp1, tp4, tp8 = (roofline("meta-llama/Llama-3.1-70B-Instruct", tp) for tp in (1, 4, 8))
    work = chunk(8192)
    assert tp8(work) < tp4(work) < tp1(work) / 2
    assert tp4(decode(1, 4096)) < tp1(decode(1, 4096))


@pytest.mark.parametrize("model", [QWEN, LLAMA8, "Qwen/Qwen3-8B"])
def test_decode_batch_64_costs_between_one_and_eight_single_requests(model):
    timing = roofline(model)
    one, many = timing(decode(1, 1024)), timing(decode(64, 1024))
    assert one < many < 8 * one


def test_moe_reads_only_touched_experts():
    """DeepSeek-V3 (TP8): one request reads ~active/total of the experts; 64 requests touch them all."""
    model = record("deepseek-ai/DeepSeek-V3")
    assert active_params(model) == 37e9
    timing = roofline("deepseek-ai/DeepSeek-V3", tensor=8)
    one, many = timing(decode(1, 1024)), timing(decode(64, 1024))
    assert 2 * one < many < 32 * one


def test_moe_without_active_params_estimates_them():
    flash = record("deepseek-ai/DeepSeek-V4-Flash")  # published: 284B total, 13B active
    assert 10e9 < active_params(flash) < 16e9
    assert active_params(record("Qwen/Qwen3-8B")) == record("Qwen/Qwen3-8B")["params"]


def test_fp8_weights_without_fp8_units_fall_back_to_bf16_rate():
    a100 = record("a100_sxm", resolve_hardware)
    timing = default_timing(record(QWEN), a100, "vllm", 1, 1)
    assert timing(chunk(1024)) > roofline(QWEN)(chunk(1024))


# --- factory ---------------------------------------------------------------

def test_factory_dispatches_on_timing_type():
    args = (record(QWEN), H200, "vllm", "fp8")
    assert make_role_timing({"timing": {"type": "fixed", "prefill_ms": 5.0, "decode_ms": 1.0}}, *args)(MIXED) == 6_000_000
    poly = {"type": "polynomial", "prefill": [1.0], "decode": [0.0, 1.0], "decode_variable": "batch_size"}
    assert make_role_timing({"timing": poly}, *args)(MIXED) == 4_000_000
    role = {"timing": {"type": "default"}, "parallelism": {"tensor": 1}}
    assert make_role_timing(role, *args)(DECODE) == roofline(QWEN)(DECODE)
    with pytest.raises(ValueError):
        make_role_timing({"timing": {"type": "magic"}}, *args)


def test_factory_reads_compiled_plan():
    """The host-offload example compiles to default timing at TP1 with FP8 KV."""
    result = compile_yaml((EXAMPLES / "host-offload-prediction.yaml").read_text())
    assert result.ok, result.diagnostics
    plan = result.plan.to_dict()
    engine, geometry = plan["engine"], plan["geometry"]["aggregated"]
    timing = make_role_timing(engine["workers"]["aggregated"], record(engine["model"]),
                         record(engine["hardware"], resolve_hardware), engine["backend"], geometry["kv_dtype"])
    assert timing(chunk(1024)) == roofline(QWEN)(chunk(1024))
