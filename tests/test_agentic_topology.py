"""Agentic traffic: the topologies the spec supports replay, the others are rule errors, and bad AgentX
(weka) traces are reported with file:line:col.

Supported (kv-cache-tiers.md, "Agentic traffic with G2"): one aggregated worker, one prefill and one
decode worker, several aggregated workers each with a `dp_rank_local` G2; `attention_data: 1`, static
workers; either G2 scope with one worker per role; `kvcr` accepted and idle (no router hints).
"""
from __future__ import annotations

import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file

from .support import EXAMPLES, read_outputs

AGENTIC = EXAMPLES / "agentic"
AGG = "engine.workers.aggregated"


def replay(tmp_path, fixture: str, *sets: str) -> tuple[dict, list[dict]]:
    argv = ["predict", "-c", str(AGENTIC / f"{fixture}.yaml"), "--output-dir", str(tmp_path / "out"),
            "--capture-per-request", "--no-progress"]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0
    return read_outputs(tmp_path / "out")


def codes(fixture: str, *sets: str) -> set[str]:
    result = compile_file(AGENTIC / f"{fixture}.yaml", overrides=list(sets))
    return {d.code for d in result.diagnostics}


def test_several_aggregated_workers_with_their_own_g2(tmp_path):
    summary, records = replay(tmp_path, "agentx-g2-local", f"{AGG}.parallelism.replicas=2")
    assert summary["completed_requests"] == 4
    assert len(summary["g2_domains"]) == 2  # one pool per worker's rank
    # round robin puts the resuming parent on the other worker than its first request: nothing to restore there
    assert {r["dp_rank"] for r in records} == {0, 1}


def test_kvcr_is_accepted_and_idle_without_router_hints(tmp_path):
    summary, _ = replay(tmp_path, "agentx-g2-local", f"{AGG}.parallelism.replicas=2",
                        f"{AGG}.kv_cache.kvcr={{}}")
    assert summary["completed_requests"] == 4
    assert sum(summary["kvcr"]["pulls"].values()) == 0


REJECTED = [
    ("AGENTIC-G2-TOPOLOGY", "agentx-g2-local", (f"{AGG}.parallelism.replicas=2",
                                                f"{AGG}.kv_cache.host_offload.scope=cluster_shared")),
    ("AGENTIC-G2-TOPOLOGY", "agentx-g2-shared-pd", ("engine.workers.prefill.parallelism.replicas=2",)),
    ("AGENTIC-G2-ATTENTION-DATA", "agentx-g2-local", (f"{AGG}.parallelism.attention_data=2",)),
    ("AGENTIC-G3", "agentx-g2-local", (f"{AGG}.kv_cache.g3_offload={{scope: worker_local, num_g3_blocks: 16}}",)),
    ("AGENTIC-G2-STATIC", "agentx-g2-local", (f"{AGG}.scaling=[{{at_seconds: 1, replicas: 2}}]",)),
    ("TRAFFIC-AGENTIC-LOAD", "agentx-g2-local", ("traffic.load={type: concurrency, concurrency: 1}",)),
    ("TRAFFIC-AGENTIC-STOP", "agentx-g2-local", ("traffic.stop={max_virtual_time_seconds: 1}",)),
]


@pytest.mark.parametrize("code, fixture, sets", REJECTED, ids=[f"{c}-{f}" for c, f, _ in REJECTED])
def test_an_unsupported_topology_is_a_rule_error(code, fixture, sets):
    assert code in codes(fixture, *sets)


def test_the_fixtures_compile_cleanly():
    for fixture in ("agentx-g2-local", "agentx-g2-shared-pd"):
        assert codes(fixture) == set()


PLAY = ('{"id":"p","block_size":4,"requests":[{"t":0,"type":"s","in":9,"out":1,"hash_ids":[1,2,3]},'
        '{"t":1,"type":"subagent","agent_id":"a","requests":[%s]}]}')


@pytest.mark.parametrize("child, pointer, line, col", [
    ('{"t":1,"type":"s","in":9,"out":1,"hash_ids":[1,2]}', "/requests/1/requests/0/hash_ids", 2, 1),
    ('{"t":1,"type":"s","in":0,"out":1,"hash_ids":[]}', "/requests/1/requests/0/in", 2, 1),
    ('{"t":-1,"type":"s","in":4,"out":1,"hash_ids":[1]}', "/requests/1/requests/0/t", 2, 1),
    ('{"t":1,"type":"s","in":4,"out":1,"hash_ids":[1]', "", 2, 190),
])
def test_a_bad_play_is_reported_at_its_line(tmp_path, child, pointer, line, col):
    good = PLAY % '{"t":1,"type":"s","in":4,"out":1,"hash_ids":[7]}'
    (tmp_path / "trace.jsonl").write_text(good + "\n" + PLAY % child + "\n")
    text = (AGENTIC / "agentx-g2-local.yaml").read_text().replace("weka-g2-restore.jsonl", "trace.jsonl")
    (tmp_path / "c.yaml").write_text(text)
    result = compile_file(tmp_path / "c.yaml")
    diagnostic, = result.diagnostics
    assert diagnostic.code == "TRACE-ROW"
    assert (diagnostic.pointer, diagnostic.span.line) == (pointer, line)
    assert diagnostic.source.endswith("trace.jsonl") and diagnostic.named_by.pointer == "/traffic/source/paths/0"
    if not pointer:
        assert diagnostic.span.col == col and "not valid JSON" in diagnostic.message


def test_a_play_block_size_other_than_the_sources_is_an_error(tmp_path):
    (tmp_path / "trace.jsonl").write_text(PLAY % '{"t":1,"type":"s","in":4,"out":1,"hash_ids":[7]}' + "\n")
    text = (AGENTIC / "agentx-g2-local.yaml").read_text().replace("weka-g2-restore.jsonl", "trace.jsonl")
    (tmp_path / "c.yaml").write_text(text.replace("block_size: 4\n    nested", "block_size: 8\n    nested"))
    diagnostic, = compile_file(tmp_path / "c.yaml").diagnostics
    assert diagnostic.pointer == "/block_size" and "is not the source's 8" in diagnostic.message
