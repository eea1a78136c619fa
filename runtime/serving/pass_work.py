"""What one vLLM-style pass computes, as the step-time providers see it (`timing.PassWork`), and its `Batch`.

A decode is one token after the first; a handed-off request's first pass on its decode rank is a decode over its
prompt; anything else is a prefill chunk, except on a decode rank (see `work_of`).
"""
from __future__ import annotations

from ..timing import PassWork
from .requests import Request


class Batch:
    """What one rank runs in one pass."""

    __slots__ = ("items", "work")

    def __init__(self, items: list[tuple[Request, int]], work: PassWork):
        self.items = items
        self.work = work


def work_of(items: list[tuple[Request, int]], speculation=None, decode_rank: bool = False,
            vllm: bool = False, hybrid: bool = False, decodes: int = 0, context: int = 0) -> PassWork:
    """The pass's work; under speculation each decode also verifies the drafts (`speculation.work`).

    On a decode rank a readmission's recompute is no prefill: the mocker (`schedule_request`) counts prompt
    tokens into the pass's prefill batch only when `worker_type != Decode`, so a recompute that reaches the end
    of its known sequence is one more decode (it samples its next token in this pass), and a chunk that does not
    costs nothing.  With `vllm` (the vLLM core's scheduler, not SGLang's, whose engine times its own way) a
    readmission's recompute that samples its next token is a decode of the pass as well as a prefill.

    vLLM's prefill batch holds a chunk's prompt tokens only (the mocker's `schedule_request`: `prompt_tokens` is
    the chunk cut to the prompt), so a recompute chunk wholly past the prompt (a readmission whose hit covers its
    prompt, or the output part of a split recompute) is no prefill: with nothing else the pass is priced as its
    decodes (facts section 70).  A `hybrid` rank (state snapshots) prices such a chunk as prefill, as AISimulate's
    state runtime does (section 45's 2,112-2,163 recompute).  Where the speculation says `prompt_end_decodes`
    (TensorRT-LLM's native MTP) the chunk that ends a prompt is a decode of its pass too, drafts and all:
    AISimulate prices such a pass as its prefill plus the decode step of every request that samples a token in it
    (DeepSeek-V3, five 1,500-token prompts and 692 tokens of a sixth: 283.954 + a five-request decode step of 16.966
    = 300.920 ms, its first tokens' 300.9197), where its vLLM prices the prefill alone (facts §88).  `decodes` and
    `context`: those of the pass's decodes the caller counted already, which `items` leaves out (the scheduler's
    in-block decodes)."""
    chunks = []
    prompt_end = speculation is not None and speculation.prompt_end_decodes
    for request, new in items:
        # a decode: one token after the first; or the first, of a prompt whose KV was all reused (TensorRT-LLM)
        if new == 1 and request.num_computed == request.num_tokens - 1 and (
                request.generated or request.first_reused_tokens == request.spec.prompt_len):
            decodes += 1
            context += request.num_computed + 1
        elif not new:  # a handed-off request's first pass on its decode rank: a decode over its prompt
            decodes += 1
            context += request.num_tokens
        elif decode_rank:
            if request.num_computed + new == request.num_tokens:
                decodes += 1
                context += request.num_tokens
        else:
            if not vllm or hybrid or request.num_computed < request.spec.prompt_len:
                chunks.append((new, request.num_computed))
            if (prompt_end or vllm and request.generated) and request.num_computed + new == request.num_tokens:
                decodes += 1  # a readmission's recompute that ends samples its next token: a decode of this pass
                context += request.num_tokens  # too (the mocker's emit_ready_tokens times every ready request);
                # on TensorRT-LLM under MTP so does a prompt's last chunk (its decode step counts it, facts §88)
    if speculation is None:
        return plain_work(tuple(chunks), decodes, context)
    return speculation.work(tuple(chunks), decodes, context)


_new = object.__new__


def plain_work(chunks: tuple, decodes: int, context: int) -> PassWork:
    """`PassWork(chunks, decodes, context)`, made once a pass: a frozen dataclass's __init__ sets each of its six
    fields through object.__setattr__ (about 3x the time); the three draft fields read their defaults (0) from the
    class, where the dataclass left them, so it is equal, hashes and `replace`s as the constructor's (tested)."""
    work = _new(PassWork)
    work.__dict__.update(prefill_chunks=chunks, decode_requests=decodes, decode_context=context)
    return work
