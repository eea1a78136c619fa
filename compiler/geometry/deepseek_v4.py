"""DeepSeek V4 state-cache geometry, following vLLM's grouped allocation.

Every layer keeps sliding-window KV; compressing layers (ratio 4 or 128) also
keep compressed KV and a compressor state, and ratio-4 layers an indexer with
its own compressor state.  Each of these is a cache spec with a (block size,
sliding window) bucket, slots per page and bytes per slot; pages are rounded up
to a 576-byte alignment.  Specs of a bucket whose page sizes occur equally
often are split into groups of `repeats` layers (the divisor that wastes the
fewest slots); other buckets form one group.  All groups share one pool row as
wide as the widest group; a request holds one row per 256 tokens of KV plus,
per windowed group, ``ceil((window + draft_tokens) / group_block) + 1`` rows.
TP replicates this KV, so no number depends on it.
"""
from __future__ import annotations

from collections import Counter, defaultdict

KERNEL_BLOCK = 256
SWA_BLOCK = 64
PAGE_ALIGN = 576
STATE_BLOCK = {4: 4, 128: 8}
FP32 = 4
MLA_SCALE_BYTES = 8


def mla_entry_bytes(model: dict) -> int:
    """fp8_ds_mla: FP8 no-RoPE part, BF16 RoPE part, and scales."""
    rope = model["qk_rope_head_dim"]
    return (model["head_dim"] - rope) + 2 * rope + MLA_SCALE_BYTES


def indexer_entry_bytes(model: dict, indexer_cache_dtype: str) -> int:
    dim = model["index_head_dim"]
    if indexer_cache_dtype == "mxfp4":
        return dim // 2 + dim // 32
    return dim + -(-dim // 128) * FP32


def _page(slots: int, slot_bytes: int) -> int:
    return -(-slots * slot_bytes // PAGE_ALIGN) * PAGE_ALIGN


def layer_specs(model: dict, indexer_cache_dtype: str) -> list[tuple[int, tuple, int]]:
    """(layer, bucket=(block, window), page bytes) for every cache spec of every layer."""
    mla = mla_entry_bytes(model)
    window = model["sliding_window"]
    specs = []
    for layer, ratio in enumerate(model["compress_ratios"][: model["num_layers"]]):
        specs.append((layer, (SWA_BLOCK, window), _page(SWA_BLOCK, mla)))
        if ratio == 0:
            continue
        coff = 2 if ratio == 4 else 1
        state_bucket = (STATE_BLOCK[ratio], coff * ratio)
        specs.append((layer, (KERNEL_BLOCK, None), _page(KERNEL_BLOCK // ratio, mla)))
        specs.append((layer, state_bucket, _page(STATE_BLOCK[ratio], 2 * coff * model["head_dim"] * FP32)))
        if ratio == 4:
            specs.append((layer, (KERNEL_BLOCK, None),
                          _page(KERNEL_BLOCK // 4, indexer_entry_bytes(model, indexer_cache_dtype))))
            specs.append((layer, state_bucket, _page(STATE_BLOCK[ratio], 2 * coff * model["index_head_dim"] * FP32)))
    return specs


def _repeats(balanced: dict[tuple, tuple[int, int]]) -> int:
    """The group size in [min, max] that pads least; ties go to the larger size."""
    counts = [count for count, _ in balanced.values()]
    multi = [count for count, sizes in balanced.values() if sizes > 1]
    low, high = (max(multi) if multi else min(counts)), max(counts)
    return min(range(low, high + 1), key=lambda d: (sum((-c) % d for c in counts), -d))


def groups(specs: list[tuple[int, tuple, int]]) -> list[dict]:
    by_bucket: dict[tuple, list] = defaultdict(list)
    for layer, bucket, page in specs:
        by_bucket[bucket].append((layer, page))
    balanced = {}
    for bucket, items in by_bucket.items():
        counts = Counter(page for _, page in items)
        if len(set(counts.values())) == 1:
            balanced[bucket] = (next(iter(counts.values())), len(counts))
    repeats = _repeats(balanced)
    out = []
    for bucket in sorted(by_bucket, key=lambda b: (b[0], b[1] or 0)):
        items = by_bucket[bucket]
        if bucket not in balanced:
            out.append({"bucket": bucket, "bytes": sum(p for _, p in items), "layers": len({l for l, _ in items})})
            continue
        layers = sorted({layer for layer, _ in items})
        parts = -(-balanced[bucket][0] // repeats)
        for index in range(parts):
            chosen = set(layers[index::parts])
            out.append({"bucket": bucket, "bytes": sum(p for l, p in items if l in chosen), "layers": len(chosen)})
    return out


def deepseek_v4_state(model: dict, *, draft_tokens: int = 0, indexer_cache_dtype: str = "auto") -> dict:
    cache_groups = groups(layer_specs(model, indexer_cache_dtype))
    row = max(g["bytes"] for g in cache_groups)
    rows = sum(-(-(window + draft_tokens) // block) + 1 for g in cache_groups
               for block, window in [g["bucket"]] if window is not None)
    return {
        "block_size": KERNEL_BLOCK,
        "bytes_per_token": -(-row // KERNEL_BLOCK),
        "row_bytes": row,
        "state_rows": rows,
        "bytes_per_request": rows * row,
        "groups": [{"block_size": g["bucket"][0], "sliding_window": g["bucket"][1], "layers": g["layers"],
                    "bytes_per_block": g["bytes"]} for g in cache_groups],
        "source": f"DeepSeek V4: {len(cache_groups)} cache groups in {row}-byte rows (one per {KERNEL_BLOCK} "
                  f"tokens) and a {rows}-row sliding-window state",
    }
