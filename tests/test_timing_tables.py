"""The default timing's measured tables: DeepSeek V4 vLLM's prefill attention, Kimi K3 B200 vLLM's prefill experts,
and Kimi K3's MTP pass (facts §98): each priced exactly as the rule in runtime/timing/default.py says."""
from __future__ import annotations

from dataclasses import replace

from kvreplay.compiler.catalog import resolve_hardware, resolve_model
from kvreplay.compiler.timing_inputs import roofline_record
from kvreplay.runtime.timing import PassWork
from kvreplay.runtime.timing.default import default_timing

B200 = resolve_hardware("b200_sxm")[0]


def record(model: str, tensor: int, backend: str = "vllm"):
    return roofline_record(resolve_model(model)[0], B200, backend, tensor, 1, tensor)


def doubled(rec, field: str):
    """`rec` with the table `field` at twice its values: a pass then costs what it did plus the table's share once."""
    return replace(rec, terms=replace(rec.terms, **{field: tuple((t, 2 * v) for t, v in getattr(rec.terms, field))}))


def table_share_ms(rec, field: str, work: PassWork) -> float:
    return (default_timing(doubled(rec, field))(work) - default_timing(rec)(work)) / 1e6


def test_deepseek_v4_vllm_prefill_attention_is_aisimulates_table():
    """43 layers at TP4: a 3,000-token prompt from none cached costs AIS's `context_attention` between its knots
    (2,048: 15.906 ms, 3,072: 25.035), and 8,192 tokens the knot itself (104.484)."""
    v4 = record("deepseek-ai/DeepSeek-V4-Flash", 4)
    expected = 15.906 + (25.035 - 15.906) * (3000 - 2048) / 1024
    assert abs(table_share_ms(v4, "prefill_attention_curve", PassWork(prefill_chunks=((3000, 0),))) - expected) < 2e-6
    assert abs(table_share_ms(v4, "prefill_attention_curve", PassWork(prefill_chunks=((8192, 0),))) - 104.484) < 2e-6
    # past the last knot (32,768: 321.447) the table goes on from its last two (16,384: 170.985)
    beyond = 321.447 + (321.447 - 170.985) * (40000 - 32768) / 16384
    assert abs(table_share_ms(v4, "prefill_attention_curve", PassWork(prefill_chunks=((40000, 0),))) - beyond) < 1e-5


def test_a_chunk_after_a_cached_prefix_adds_new_times_cached_tokens_up_to_4096():
    """A chunk of n new tokens after c cached costs the table at n plus 1.8e-6 ms x n x min(c, 4,096) at TP4 (AIS, 1,024
    new tokens: 9.03 ms after none, 15.89 after 4,096, 15.98 after 8,192); the term is 0 from none cached."""
    v4 = record("deepseek-ai/DeepSeek-V4-Flash", 4)
    t = default_timing(v4)
    alone = t(PassWork(prefill_chunks=((1024, 0),)))
    for cached, counted in ((2048, 2048), (4096, 4096), (8192, 4096)):
        after = t(PassWork(prefill_chunks=((1024, cached),)))
        assert abs((after - alone) / 1e6 - 1.8e-6 * 1024 * counted) < 2e-6, cached


def test_a_passes_chunks_are_priced_as_k_chunks_of_their_mean():
    """AISimulate's runs price 2 chunks (1,215 new after 8,185; 6,972 new) as `predict_prefill_latency(2, 8,186,
    4,092)`: its attention is 2 chunks of 4,094 new after 4,092 cached, whatever the chunks' own lengths (the GEMMs
    count the pass's own 8,187 new tokens)."""
    v4 = record("deepseek-ai/DeepSeek-V4-Flash", 4)
    passed = PassWork(prefill_chunks=((1215, 8185), (6972, 0)))
    table = table_share_ms(v4, "prefill_attention_curve", passed)
    assert abs(table - table_share_ms(v4, "prefill_attention_curve", PassWork(prefill_chunks=((4094, 4092),) * 2))) < 2e-6
    assert abs(table - 2 * (25.035 + (35.709 - 25.035) * (4094 - 3072) / 1024)) < 2e-6
    mean = default_timing(v4)(passed) - default_timing(v4)(PassWork(prefill_chunks=((8187, 0),)))
    assert abs(mean / 1e6 - table - 2 * 1.8e-6 * 4094 * 4092 + table_share_ms(
        v4, "prefill_attention_curve", PassWork(prefill_chunks=((8187, 0),)))) < 2e-6


def test_kimi_b200_vllm_prefill_experts_are_aisimulates_table():
    """92 LatentMoE layers at TP8 EP8: a 3,072-token prefill's routed experts cost AIS's `context_moe` (352.46 ms), a
    2,560-token one the mean of its knots (254.62 at 2,048); a decode pass keeps its expert-read curve."""
    kimi = record("moonshotai/Kimi-K3", 8)
    assert abs(table_share_ms(kimi, "prefill_expert_curve", PassWork(prefill_chunks=((3072, 0),))) - 352.46) < 1e-6
    mid = (254.62 + 352.46) / 2
    assert abs(table_share_ms(kimi, "prefill_expert_curve", PassWork(prefill_chunks=((2560, 0),))) - mid) < 1e-6
    assert table_share_ms(kimi, "prefill_expert_curve", PassWork(decode_requests=8, decode_context=8 * 4096)) == 0
    # SGLang has no table: its experts are their read plus their FLOPs
    assert record("moonshotai/Kimi-K3", 8, "sglang").terms.prefill_expert_curve == ()


def test_kimi_decode_reads_the_share_of_experts_its_curve_says():
    """B200 vLLM TP8: a decode pass of 8 reads 13.2 % of the routed experts (linear between knots: 5 tokens read
    the mean of 4's 4.8 % and 6's 8.7 %), where 1 - (1 - 16/896)^8 would be 13.4 %."""
    kimi = record("moonshotai/Kimi-K3", 8)
    full = kimi.weight_bytes * kimi.routed_weight_fraction / (B200["memory_bandwidth_gbps"] * 1e9
                                                               * kimi.terms.expert_efficiency)
    none = replace(kimi, terms=replace(kimi.terms, decode_expert_share=((1, 0.0),)))
    for batch, share in ((8, 0.132), (5, (0.048 + 0.087) / 2)):
        work = PassWork(decode_requests=batch, decode_context=batch * 4096)
        paid = (default_timing(kimi)(work) - default_timing(none)(work)) / 1e9
        assert abs(paid - share * full) < 2e-9, batch


def test_kimi_mtp_pass_adds_the_same_whatever_its_drafts():
    """A native-MTP verify pass of Kimi K3 vLLM costs the plain pass of its tokens x (93 + 2.3) / 93 at nextn 1 and
    2 alike (AIS 1.025x and 1.027x); DeepSeek-V3 keeps (61 + nextn) / 61."""
    t = default_timing(record("moonshotai/Kimi-K3", 8))
    for drafts in (1, 2):
        plain = t(PassWork(decode_requests=1 + drafts, decode_context=(1 + drafts) * 4096))
        mtp = t(PassWork(decode_requests=1, decode_context=4096, draft_tokens=drafts, draft_context=drafts * 4096,
                         draft_layers=drafts))
        assert abs(mtp - plain * 95.3 / 93) <= 1, drafts
    assert record("deepseek-ai/DeepSeek-V3", 8).terms.draft_layers_equivalent == 0.0
