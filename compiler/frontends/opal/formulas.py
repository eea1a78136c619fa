"""opal's model and block-pool formulas over a Hugging Face `config.json` (spec/opal-reference.md).

    params (dense) = vocab*hidden + layers*(q_proj + 2*kv_heads*head_dim*hidden + o_proj
                     + 3*hidden*intermediate + 2*hidden) + lm_head        (q_proj = o_proj = hidden*heads*head_dim;
                                                                         lm_head 0 when tie_word_embeddings)
    KV bytes per token = 2*kv_heads*head_dim*layers*kv_bytes   (MLA: (kv_lora_rank + qk_rope_head_dim)*layers*kv_bytes)
    total_gpu_blocks = floor((memory_gb*tp*2^30 - params*bytes_per_param) / (block_size*kv_bytes_per_token))

Arithmetic is exact (`Fraction`): memory and capacities may be fractional GB, and a block count must not
depend on float rounding.  `gpu_memory_utilization` enters none of this, as in opal.
"""
from __future__ import annotations

import math
from fractions import Fraction

GIB = 2 ** 30
REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")
# weight bytes per parameter by (a piece of) the checkpoint dtype's name, first match wins
DTYPE_BYTES = (("fp4", Fraction(1, 2)), ("float4", Fraction(1, 2)), ("fp8", Fraction(1)), ("float8", Fraction(1)),
               ("bfloat16", Fraction(2)), ("bf16", Fraction(2)), ("float16", Fraction(2)), ("fp16", Fraction(2)),
               ("float32", Fraction(4)), ("fp32", Fraction(4)))
QUANT_METHOD_BYTES = {"fp8": Fraction(1), "fbgemm_fp8": Fraction(1), "nvfp4": Fraction(1, 2), "mxfp4": Fraction(1, 2),
                      "fp4": Fraction(1, 2)}


def missing_fields(config: dict) -> list[str]:
    """The fields the formulas need that `config` lacks or gives as something other than a positive integer."""
    return [name for name in REQUIRED if not _positive_int(config.get(name))]


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def head_dim(config: dict) -> int:
    given = config.get("head_dim")
    return given if _positive_int(given) else config["hidden_size"] // config["num_attention_heads"]


def kv_heads(config: dict) -> int:
    given = config.get("num_key_value_heads")
    return given if _positive_int(given) else config["num_attention_heads"]


def mla(config: dict) -> bool:
    return _positive_int(config.get("kv_lora_rank")) and isinstance(config.get("qk_rope_head_dim"), int)


def params(config: dict) -> int:
    hidden, heads, dim = config["hidden_size"], config["num_attention_heads"], head_dim(config)
    projection = hidden * heads * dim  # q_proj, and o_proj
    layer = 2 * projection + 2 * kv_heads(config) * dim * hidden + 3 * hidden * config["intermediate_size"] + 2 * hidden
    embedding = config["vocab_size"] * hidden
    lm_head = 0 if config.get("tie_word_embeddings") else embedding
    return embedding + config["num_hidden_layers"] * layer + lm_head


def dtype_name(config: dict) -> str:
    name = config.get("torch_dtype", config.get("dtype", "bfloat16"))
    return name if isinstance(name, str) else "bfloat16"


def bytes_per_param(config: dict) -> Fraction:
    quantization = config.get("quantization_config")
    if isinstance(quantization, dict) and str(quantization.get("quant_method", "")).lower() in QUANT_METHOD_BYTES:
        return QUANT_METHOD_BYTES[str(quantization["quant_method"]).lower()]
    name = dtype_name(config).lower()
    return next((size for piece, size in DTYPE_BYTES if piece in name), Fraction(2))


def kv_bytes_per_element(config: dict) -> Fraction:
    """The weight bytes, unless `quantization_config.kv_cache_scheme.num_bits` says otherwise."""
    quantization = config.get("quantization_config")
    scheme = quantization.get("kv_cache_scheme") if isinstance(quantization, dict) else None
    bits = scheme.get("num_bits") if isinstance(scheme, dict) else None
    if _positive_int(bits):
        return Fraction(bits, 8)
    return bytes_per_param(config)


def kv_bytes_per_token(config: dict) -> int:
    layers, width = config["num_hidden_layers"], kv_bytes_per_element(config)
    if mla(config):
        return math.ceil((config["kv_lora_rank"] + config["qk_rope_head_dim"]) * layers * width)
    return math.ceil(2 * kv_heads(config) * head_dim(config) * layers * width)


def model_bytes(config: dict) -> int:
    return math.ceil(params(config) * bytes_per_param(config))


def total_gpu_blocks(memory_gb, tp: int, model_size: int, block_size: int, kv_per_token: int) -> int:
    """opal's pool: floor((memory_gb*tp*2^30 - model bytes) / (block_size*kv bytes per token)), at least 0."""
    free = Fraction(memory_gb) * tp * GIB - model_size
    return max(0, math.floor(free / (block_size * kv_per_token)))


def blocks_needed(max_position_embeddings: int, block_size: int) -> int:
    """Blocks one full-length request holds: ceil(max_position_embeddings / block_size)."""
    return -(-max_position_embeddings // block_size)


def smallest_memory_gb(blocks: int, tp: int, model_size: int, block_size: int, kv_per_token: int) -> float:
    """The smallest `memory_gb` (per GPU, rounded up to 0.1 GB) whose pool holds `blocks` blocks."""
    exact = Fraction(blocks * block_size * kv_per_token + model_size, tp * GIB)
    return math.ceil(exact * 10) / 10
