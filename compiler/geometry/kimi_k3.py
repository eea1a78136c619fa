"""Kimi K3 state-cache geometry: enlarge the page until one KDA state per layer fits.

Token KV lives in the MLA layers (`kv_layers`), so a page of `block_size`
tokens gives each of them ``block_size * per_layer_rate`` bytes.  A KDA layer's
state must fit in one such page: per rank it holds ``heads/tp`` heads, each with
three short-convolution streams (q, k, v) of `head_dim` channels and
``kernel - 1`` history columns in the conv dtype, plus a ``head_dim x head_dim``
float32 recurrent state.  The block size is multiplied by the smallest integer
that makes the page hold that state; a request's state is one padded page per
KDA layer.  (vLLM's hybrid allocator, as AISimulate models it.)
"""
from __future__ import annotations

from .kv_bytes import DTYPE_BYTES

RECURRENT_STATE_BYTES = 4  # the KDA recurrent state is always float32


def conv_width(model: dict, mamba_cache_dtype: str) -> int:
    if mamba_cache_dtype in ("float16", "float32"):
        return DTYPE_BYTES[mamba_cache_dtype]
    return DTYPE_BYTES[model.get("dtype", "bfloat16")]


def raw_state_page(model: dict, tensor: int, mamba_cache_dtype: str) -> int:
    heads = model["kda_heads"] // tensor
    dim, kernel = model["kda_head_dim"], model["conv_kernel_size"]
    conv = 3 * dim * (kernel - 1) * conv_width(model, mamba_cache_dtype)
    return heads * (conv + dim * dim * RECURRENT_STATE_BYTES)


def kimi_k3_state(model: dict, *, tensor: int, block_size: int, bytes_per_token: int,
                  mamba_cache_dtype: str = "auto") -> dict:
    per_layer = bytes_per_token // model["kv_layers"]
    raw = raw_state_page(model, tensor, mamba_cache_dtype)
    multiplier = -(-raw // (block_size * per_layer))
    resolved = block_size * multiplier
    padded = resolved * per_layer
    state_layers = model["num_layers"] - model["kv_layers"]
    return {
        "block_size": resolved,
        "bytes_per_token": bytes_per_token,
        "bytes_per_request": state_layers * padded,
        "raw_bytes_per_request": state_layers * raw,
        "block_multiplier": multiplier,
        "source": f"Kimi K3: {state_layers} KDA layers x one {padded}-byte page (raw state {raw} B/layer at "
                  f"TP{tensor}); block_size {block_size} x {multiplier}",
    }
