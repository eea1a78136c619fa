"""opal's model and block-pool formulas (spec/opal-reference.md), on granite-3.3-8b-instruct and hand-made configs."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

from kvreplay.compiler.frontends.opal import formulas, hf_model
from kvreplay.compiler.pipeline import compile_file

from .support import EXAMPLES

OPAL = EXAMPLES / "opal"
GRANITE = json.loads((OPAL / "model-configs" / "granite-3.3-8b-instruct" / "config.json").read_text())


def test_granite_params_kv_bytes_and_weights():
    assert formulas.params(GRANITE) == 8_170_860_544
    assert formulas.kv_bytes_per_token(GRANITE) == 163_840
    assert formulas.bytes_per_param(GRANITE) == 2
    assert formulas.model_bytes(GRANITE) == 16_341_721_088
    assert round(formulas.model_bytes(GRANITE) / 2 ** 30, 2) == 15.22  # opal's "model_size=15.22GB"


@pytest.mark.parametrize("memory_gb, block_size, blocks", [(80, 16, 26_534), (80, 8, 53_068), (80, 32, 13_267),
                                                            (36, 16, 8_511)])
def test_granite_total_gpu_blocks(memory_gb, block_size, blocks):
    assert formulas.total_gpu_blocks(memory_gb, 1, formulas.model_bytes(GRANITE), block_size, 163_840) == blocks


def test_tensor_parallel_multiplies_the_memory():
    # (2 x 36 GiB - 15.22 GiB of weights) / 2.5 MiB per block
    assert formulas.total_gpu_blocks(36, 2, 16_341_721_088, 16, 163_840) == (2 * 36 * 2 ** 30 - 16_341_721_088) // 2_621_440


def test_smallest_memory_for_one_full_length_request():
    needed = formulas.blocks_needed(GRANITE["max_position_embeddings"], 16)
    assert needed == 8192
    smallest = formulas.smallest_memory_gb(needed, 1, 16_341_721_088, 16, 163_840)
    assert smallest == 35.3
    assert formulas.total_gpu_blocks(smallest, 1, 16_341_721_088, 16, 163_840) >= needed
    assert formulas.total_gpu_blocks(smallest - 0.1, 1, 16_341_721_088, 16, 163_840) < needed


def test_untied_embeddings_add_the_lm_head():
    untied = {**GRANITE, "tie_word_embeddings": False}
    assert formulas.params(untied) - formulas.params(GRANITE) == 49_159 * 4_096


@pytest.mark.parametrize("dtype, width", [("bfloat16", 2), ("float16", 2), ("float8_e4m3fn", 1), ("fp4", Fraction(1, 2)),
                                          ("float32", 4)])
def test_weight_bytes_follow_the_dtype(dtype, width):
    config = {**GRANITE, "torch_dtype": dtype}
    assert formulas.bytes_per_param(config) == width
    assert formulas.kv_bytes_per_token(config) == 2 * 8 * 128 * 40 * width


def test_kv_cache_scheme_bits_set_the_kv_width():
    config = {**GRANITE, "quantization_config": {"quant_method": "fp8", "kv_cache_scheme": {"num_bits": 8}}}
    assert formulas.bytes_per_param(config) == 1
    assert formulas.kv_bytes_per_token(config) == 81_920


def test_mla_keeps_one_latent_per_layer():
    config = {**GRANITE, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    assert formulas.kv_bytes_per_token(config) == (512 + 64) * 40 * 2


def test_head_dim_and_kv_heads_default_from_the_attention_heads():
    config = {k: v for k, v in GRANITE.items() if k != "num_key_value_heads"}
    assert formulas.kv_heads(config) == 32 and formulas.head_dim(config) == 4096 // 32
    assert formulas.kv_bytes_per_token(config) == 2 * 32 * 128 * 40 * 2


def test_the_model_record_of_a_config():
    facts = hf_model.read("../examples/opal/model-configs", "granite-3.3-8b-instruct", OPAL.parent.parent / "tests")
    assert facts["params"] == 8_170_860_544 and facts["kv_bytes_per_token"] == 163_840
    assert facts["max_position_embeddings"] == 131_072
    record = facts["catalog_record"]
    assert (record["num_layers"], record["num_kv_heads"], record["head_dim"], record["weight_dtype"]) == \
        (40, 8, 128, "bfloat16")


def test_a_config_without_the_needed_fields(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"hidden_size": 4096}))
    facts = hf_model.read(".", "m", tmp_path)
    assert "lacks `num_hidden_layers`, `num_attention_heads`, `vocab_size`, `intermediate_size`" in facts["problem"]


@pytest.mark.parametrize("memory_gb, block_size, blocks", [(80, 16, 26_534), (80, 8, 53_068), (80, 32, 13_267),
                                                            (36, 16, 8_511)])
def test_the_compiled_plan_has_opal_s_block_count(memory_gb, block_size, blocks):
    result = compile_file(OPAL / "defaults.json", [f"worker.hw.memory_gb={memory_gb}",
                                                   f"worker.vllm_params.block_size={block_size}"])
    assert result.ok, result.diagnostics
    (role,) = result.plan.records.roles
    assert (role.g1_blocks, role.block_size) == (blocks, block_size)
    assert result.plan.to_dict()["opal"]["derived"]["total_gpu_blocks"] == blocks
