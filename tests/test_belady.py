"""Belady eviction: the offline bound never reuses less than LRU, on hand-built and random request lists."""
from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.build import build


def spec(requests: list[dict], policy: str, blocks: int, block_size: int = 4) -> dict:
    return {
        "version": 1,
        "topology": {"kind": "aggregated", "workers": {"initial_workers": 1}},
        "engine": {"model": "Qwen/Qwen3-8B", "hardware": "h100_sxm", "kv_eviction_policy": policy,
                   "workers": {"aggregated": {"timing": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0},
                                              "kv_cache": {"block_size": block_size,
                                                           "capacity": {"type": "fixed", "blocks": blocks}}}}},
        "requests": requests,
    }


def replay(document: dict):
    result = compile_bytes(orjson.dumps(document), "belady.json")
    assert result.ok, result.diagnostics
    run = build(result.plan.records)
    run.run()
    return run


def reused(run) -> list[int]:
    return [r.first_reused_tokens or 0 for r in sorted(run.requests, key=lambda r: r.spec.index)]


def requests_of(prompts: list[list[int]], output: int = 2, gap_ms: float = 100.0) -> list[dict]:
    """One request per prompt, far enough apart that none overlaps the next."""
    return [{"id": f"r{i}", "arrival_time_ms": i * gap_ms, "input_tokens": len(p), "input_token_ids": p,
             "output_tokens": output} for i, p in enumerate(prompts)]


A = list(range(1, 9))      # two blocks of 4
B = list(range(101, 109))
C = list(range(201, 213))  # three blocks of 4


def test_belady_keeps_the_block_needed_soonest():
    """G1 of 6 blocks.  A and B leave two cached blocks each; their partial output blocks hold no key and go
    back to the head of the free queue.  C needs four blocks: the two keyless ones and two cached ones.  LRU
    drops A's (least recently used) and misses them next; Belady drops B's (never used again) and reuses both
    of A's blocks (8 tokens; A's last token, the ninth, is computed)."""
    prompts = [A, B, C, A + [9]]
    lru = reused(replay(spec(requests_of(prompts), "lru", blocks=6)))
    belady = reused(replay(spec(requests_of(prompts), "belady", blocks=6)))
    assert lru == [0, 0, 0, 0]
    assert belady == [0, 0, 0, 8]


def test_the_report_names_the_policy_and_its_assumption(tmp_path):
    from kvreplay.cli import main

    path = tmp_path / "belady.json"
    path.write_bytes(orjson.dumps(spec(requests_of([A, A + [9]]), "belady", blocks=8)))
    assert main(["replay", str(path), "--output-dir", str(tmp_path / "out"), "--no-progress"]) == 0
    summary = orjson.loads((tmp_path / "out" / "prediction.json").read_bytes())
    assert summary["kv_eviction_policy"] == "belady"
    assert "next use" in summary["kv_eviction_assumption"]


prefixes = st.lists(st.lists(st.integers(1, 6), min_size=1, max_size=4), min_size=2, max_size=12)


@settings(max_examples=150, deadline=None)
@given(prefixes, st.integers(3, 12))
def test_belady_never_reuses_less_than_lru(chains, blocks):
    """Random prompts built from a few shared 4-token blocks, requests that never overlap in time."""
    prompts = [[token for part in chain for token in range(part * 10, part * 10 + 4)] + [999] for chain in chains]
    lru = sum(reused(replay(spec(requests_of(prompts), "lru", blocks=blocks))))
    belady = sum(reused(replay(spec(requests_of(prompts), "belady", blocks=blocks))))
    assert belady >= lru
