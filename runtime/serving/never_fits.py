"""Why a request can never run (so it is rejected instead of stalling the replay), and how the context length
cuts its output short."""
from __future__ import annotations

from dataclasses import replace

from .requests import RequestSpec


def within_context(spec: RequestSpec, context_limit: int | None) -> RequestSpec:
    """`spec` with its output cut where prompt plus output would pass `context_limit`.

    As vLLM with `max_model_len` (and AISimulate, facts §12): a prompt that fits runs, and its generation
    stops when the sequence reaches the limit; at least the first token is made, from the prefill.
    """
    if context_limit is None or spec.prompt_len + spec.output_len <= context_limit \
            or spec.prompt_len >= context_limit:
        return spec
    asked = spec.output_len if spec.requested_output_len is None else spec.requested_output_len  # (cut twice)
    return replace(spec, output_len=max(1, context_limit - spec.prompt_len), requested_output_len=asked)


def never_fits(spec: RequestSpec, ranks: tuple, context_limit: int | None) -> str:
    """The reason, or "".  `ranks`: the rank it is placed on, or (a prefill rank, a decode rank) in P/D."""
    if context_limit is not None and spec.prompt_len >= context_limit:  # (no room for one token: AISimulate's rule)
        verb = "exceeds" if spec.prompt_len > context_limit else "fills (no room for an output token)"
        return f"the prompt ({spec.prompt_len} tokens) {verb} context_length {context_limit}"
    total = spec.prompt_len + spec.output_len
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


def waits_to_be_rejected(spec: RequestSpec, rank, context_limit: int | None) -> bool:
    """Is `spec` refused for its prompt: one that reaches the context length or needs more G1 blocks than `rank`
    holds?  AISimulate's mocker (vLLM and TensorRT-LLM) lets such a request wait its turn: the scheduler rejects
    it when admission reaches it, at the end of that pass (reference-facts section 22)."""
    if context_limit is not None and spec.prompt_len >= context_limit:
        return True
    return rank.blocks_for(spec.prompt_len) + rank.state_blocks > rank.pool.capacity
