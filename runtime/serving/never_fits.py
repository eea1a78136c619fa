"""Why a request can never run (so it is rejected on arrival instead of stalling the replay)."""
from __future__ import annotations

from .requests import RequestSpec


def never_fits(spec: RequestSpec, ranks: tuple, context_limit: int | None) -> str:
    """The reason, or "".  `ranks`: the rank it is placed on, or (a prefill rank, a decode rank) in P/D."""
    total = spec.prompt_len + spec.output_len
    if context_limit is not None and total > context_limit:
        return f"prompt plus output ({total} tokens) exceeds context_length {context_limit}"
    if len(ranks) == 1:
        return _fit_problem(ranks[0], spec.prompt_len, total)
    # P/D: the prefill rank holds the prompt and its first token, the decode rank the whole sequence
    prefill, decode = ranks
    return _fit_problem(prefill, spec.prompt_len, spec.prompt_len + 1) or _fit_problem(decode, spec.prompt_len, total)


def _fit_problem(rank, prompt: int, total: int) -> str:
    """Why a request of `total` tokens (`prompt` of them known up front) can never run on this rank, or ""."""
    prompt_blocks = rank.blocks_for(prompt) + rank.state_blocks
    if prompt_blocks > rank.pool.capacity:
        return f"the prompt needs {prompt_blocks} G1 blocks but {rank.name} holds {rank.pool.capacity}"
    needed = rank.blocks_for(total) + rank.state_blocks
    if needed > rank.pool.capacity:
        return f"prompt plus output need {needed} G1 blocks but {rank.name} holds {rank.pool.capacity}"
    if not rank.chunked and total - 1 > rank.max_batched:
        # without chunking a prefill (or the recompute after a preemption) must fit one pass
        return (f"prompt plus output ({total} tokens) exceed max_batched_tokens {rank.max_batched} with "
                "chunked prefill disabled")
    return ""
