"""What SGLang's scheduler keeps per DP rank beside its radix cache, and how a request's KV enters the tree.

A request's KV is a lease: the last radix node of its cached prefix (locked),
the tokens that path covers, and the end of what it has allocated (page
multiples; the tokens in between are its private pages).  SGLang inserts a
request's complete pages into the tree after its prefill (cache_unfinished_req)
and when it finishes (cache_finished_req); a page the tree already holds is a
duplicate and is freed, and the lock moves to the new last node.

A finished request leaves prompt + all its output cached, in whole pages: with
the overlap scheduler SGLang has already allocated the next decode step's slot
when the last token is sampled, so the KV of every sampled token is committed
(`kv_committed_len` = prompt + output in cache_finished_req), one token more
than vLLM, which never computes the last token's KV.  AISimulate agrees: a
four-turn session reuses 1,152 tokens per turn (1,024 + 128) where vLLM at
page 1 would reuse 1,151.

Constants are SGLang v0.5.20's defaults (environ.py / server_args.py), as
AISimulate's mocker uses them.  With attention-DP (`attention_data` > 1) SGLang's
server_args (`_handle_data_parallelism`) multiplies schedule_conservativeness by
0.3, which scales the new-token ratio's start and floor, and divides
chunked_prefill_size by the DP size, so each rank's extend budget is its share of
`max_batched_tokens` (AISimulate agrees: 2,048-token prompts at DP 2 extend two per
rank in a pass, not three, and a third 200 / 1,000 request per rank is admitted
right after the first extend instead of after a retraction; facts section 61).
"""
from __future__ import annotations

INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO (x schedule_conservativeness, 1.0)
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
NEW_TOKEN_RATIO_DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
DP_ATTENTION_CONSERVATIVENESS = 0.3  # server_args: schedule_conservativeness x 0.3 with attention-DP
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: the output a waiting request is charged at most
MAX_PREFILL_TOKENS = 16384  # server_args.max_prefill_tokens
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS: free tokens kept per surviving request after a retraction


class Lease:
    __slots__ = ("node", "cached", "end")

    def __init__(self, node, cached: int, end: int):
        self.node = node
        self.cached = cached  # tokens of its path in the tree
        self.end = end  # tokens allocated (its private pages are cached..end)


class SglangState:
    """A rank's scheduler state: the new-token ratio, leases, and the prefill-decode interval left."""

    __slots__ = ("ratio", "min_ratio", "decay", "chunk", "leases", "interval", "blocked", "policy", "retractions", "extend", "retracted", "decodes",
                 "overlap", "pending", "ghosts", "started", "last_start", "last_end")

    def __init__(self, interval: int = 0, policy: str = "fcfs", overlap: bool = False, chunk: int = 8192,
                 dp_size: int = 1):
        init = INIT_NEW_TOKEN_RATIO * (DP_ATTENTION_CONSERVATIVENESS if dp_size > 1 else 1.0)
        self.ratio = init
        self.min_ratio = init * MIN_NEW_TOKEN_RATIO_FACTOR
        self.decay = (init - self.min_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.chunk = chunk // dp_size  # this rank's extend budget (chunked_prefill_size // dp_size)
        self.leases: dict[int, Lease] = {}  # id(request) -> its lease
        self.interval = interval  # prefill_decode_interval
        self.blocked = 0  # scheduler rounds before the next prefill may run
        self.policy = policy
        self.retractions = 0
        self.extend = False  # the pass in flight is an extend pass
        self.retracted: list | bool = False  # the requests the pass in flight retracted (False: none)
        self.decodes = 0  # decode passes run (KV events flush every 40)
        # the overlap scheduler (`host_loop`, sglang_overlap.py): cache results waiting for the next decision, the
        # requests the last pass finished, and when the pass in flight and the last pass started and ended
        self.overlap = overlap
        self.pending: list = []
        self.ghosts: list = []
        self.started = self.last_start = self.last_end = None


def observed(state, apply, *args) -> None:
    """A pass result reaches the cache: now, or with the overlap scheduler once the next pass is decided."""
    if state.overlap:
        state.pending.append((apply, args))
    else:
        apply(*args)


def insert(pool, lease: Lease, spec, tokens: int) -> None:
    """Insert the request's first `tokens` (floored to pages) in the tree; its lock moves to the new last node,
    its duplicate pages are freed and the others now belong to the tree."""
    tokens = pool.floor(tokens)
    if tokens <= lease.cached or not pool.caching:
        return
    held, node = pool.insert(spec, tokens, lease.node)  # (the walk starts at the lease's locked node)
    if held > lease.cached:
        pool.give_back(held - lease.cached)  # another request inserted these first: ours are duplicates
    pool.own(tokens - max(held, lease.cached))
    pool.lock(node)
    pool.unlock(lease.node)
    lease.node, lease.cached = node, tokens


def release(pool, lease: Lease) -> None:
    """Free the lease's private pages and unlock its path (what stays in the tree becomes evictable)."""
    pool.give_back(lease.end - lease.cached)
    pool.unlock(lease.node)
