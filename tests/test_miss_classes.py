"""Why each missed prompt token was not reused (issue 17 item 2): hand-computed scenarios, and the classes adding
up exactly to the missed prompt tokens (committed_prefill_tokens) on every example and on the vendored traces."""
from __future__ import annotations

import itertools
import json

import pytest

from kvreplay.cli import main
from kvreplay.examples.trace_config import mooncake_trace_config
from kvreplay.runtime.analysis.miss_classes import CLASSES

from .scenarios import aggregated_config, predict_scenario, row
from .support import EXAMPLES, read_outputs, shared_trace


def classes(out) -> tuple[dict, list[dict]]:
    summary, records = read_outputs(out)
    nonzero = lambda counts: {k: v for k, v in counts.items() if v}  # noqa: E731
    return nonzero(summary["miss_classes"]), [nonzero(r["miss_classes"]) for r in records]


def test_compulsory_then_hit_and_the_last_block(tmp_path):
    # R1 finds R0's first block; each prompt's second block holds its last token: recomputed (last_block)
    rows = [row(0, 8, 1, [1, 2]), row(1000, 8, 1, [1, 2])]
    out = predict_scenario(tmp_path, rows, aggregated_config({}, g1_blocks=16), "c.yaml", "--explain-misses",
                           "--capture-per-request")
    total, per_request = classes(out)
    assert per_request == [{"compulsory": 4, "last_block": 4}, {"last_block": 4}]
    assert total == {"compulsory": 4, "last_block": 8}
    assert read_outputs(out)[0]["committed_prefill_tokens"] == 12


def test_policy_and_capacity_misses(tmp_path):
    # G1 of 3 blocks (an admission takes 2: its output token comes with the prefill).  R1 takes the fresh block and
    # evicts key 2 (R0's tail goes first); R2 hits 7 and takes one
    # block: the LRU head, key 1.  R3 misses key 1: Belady at 3 blocks evicts key 2 for R1 (key 1 and 2 tie at
    # R3, the tail freed first goes) and key 8 (never used again) for R2, so it keeps key 1: a policy miss
    rows = [row(0, 8, 1, [1, 2]), row(1000, 8, 1, [7, 8]), row(2000, 8, 1, [7, 8]), row(3000, 8, 1, [1, 2])]
    out = predict_scenario(tmp_path, rows, aggregated_config({}, g1_blocks=3), "p.yaml", "--explain-misses",
                           "--capture-per-request")
    total, per_request = classes(out)
    assert per_request == [{"compulsory": 4, "last_block": 4}, {"compulsory": 4, "last_block": 4},
                           {"last_block": 4}, {"policy": 4, "last_block": 4}]
    assert total == {"compulsory": 8, "policy": 4, "last_block": 16}
    # with 2 blocks (7-token prompts, so that prompt and output fit) R1 evicts both of R0's, and so does Belady
    # (R1 needs them all): a capacity miss; the partial block holding the last token is 3 tokens
    (tmp_path / "two").mkdir()
    short = [row(0, 7, 1, [1, 2]), row(1000, 7, 1, [7, 8]), row(2000, 7, 1, [1, 2])]
    out = predict_scenario(tmp_path / "two", short, aggregated_config({}, g1_blocks=2), "c.yaml",
                           "--explain-misses", "--capture-per-request")
    assert classes(out)[1] == [{"compulsory": 4, "last_block": 3}, {"compulsory": 4, "last_block": 3},
                               {"capacity": 4, "last_block": 3}]


def test_another_rank_held_it(tmp_path):
    # two data-parallel ranks, round robin: R1 lands on rank 1 while rank 0 holds key 1
    rows = [row(0, 8, 1, [1, 2]), row(1000, 8, 1, [1, 2])]
    config = aggregated_config({}, g1_blocks=16, parallelism="attention_data: 2")
    out = predict_scenario(tmp_path, rows, config, "d.yaml", "--explain-misses", "--capture-per-request")
    assert classes(out)[1] == [{"compulsory": 4, "last_block": 4}, {"placement": 4, "last_block": 4}]


def test_the_curve_beside_the_run(tmp_path):
    rows = [row(0, 8, 1, [1, 2]), row(1000, 8, 1, [7, 8]), row(2000, 8, 1, [7, 8]), row(3000, 8, 1, [1, 2])]
    out = predict_scenario(tmp_path, rows, aggregated_config({}, g1_blocks=3), "p.yaml", "--explain-misses")
    curve = read_outputs_summary(out)["miss_ratio_curve"]
    # ideal LRU, keys accessed tail first: R2 finds 7 at depth 1; R3 finds 1 at depth 3 (R1's 7, 8 since).  The
    # replay at 3 blocks hits only R2's 4 tokens: R2 recomputes its last block into a new block, evicting key 1
    assert curve["points"] == [[1, 4, 0.125], [3, 8, 0.25]]
    assert curve["replay"] == {"capacity_blocks": 3, "hit_tokens": 4}
    assert curve["belady"] == [[3, 8]]
    assert curve["saturation_blocks"] == 3 and curve["unbounded_hit_tokens"] == 8
    # the gap at 3 blocks: the ideal LRU's 8 tokens less the replay's 4 is R3's key 1, a policy miss (above)
    gap = curve["gap"]
    assert (gap["ideal_lru_hit_tokens"], gap["replay_hit_tokens"], gap["hit_by_replay_only"]) == (8, 4, 0)
    assert {k: v for k, v in gap["missed_by_replay"].items() if v} == {"policy": 4}


def read_outputs_summary(out) -> dict:
    return json.loads((out / "prediction.json").read_bytes())


def check_sums(out) -> None:
    summary, records = read_outputs(out)
    assert sum(summary["miss_classes"].values()) == summary["committed_prefill_tokens"]
    assert set(summary["miss_classes"]) == set(CLASSES)
    assert records, "the run wrote no per-request records"
    for r in records:  # each request's classes: exactly what its admissions did not reuse
        admissions = r.get("admission_history") or []
        if r["miss_classes"] is None:
            assert not admissions
            continue
        assert min(r["miss_classes"].values()) >= 0
        if "admission_history" in r:
            # (a P/D decode activation, neither the first admission nor a readmission, computes nothing)
            computing = [a for a in admissions if a["admission_ordinal"] == 0 or a["is_readmission"]]
            # (a readmission may reuse more than the prompt, its own output too: it then misses no prompt token)
            missed = sum(max(0, r["input_length"] - a["reused_input_tokens"]) for a in computing)
            assert sum(r["miss_classes"].values()) == missed, r["index"]


def check_gap(summary: dict) -> None:
    """ideal - replay = the blocks the ideal LRU hit and the replay missed, by class, less the replay's own."""
    gap = summary["miss_ratio_curve"]["gap"]
    assert gap["ideal_lru_hit_tokens"] - gap["replay_hit_tokens"] == \
        sum(gap["missed_by_replay"].values()) - gap["hit_by_replay_only"]
    assert min(gap["missed_by_replay"].values()) >= 0 and gap["hit_by_replay_only"] >= 0


# (SGLang's radix cache has no block keys to classify: predict refuses --explain-misses there, test_sglang_parity.py)
EXAMPLE_FILES = sorted(p for p in itertools.chain(EXAMPLES.glob("*.yaml"), (EXAMPLES / "opal").glob("*.json"))
                       if "backend: sglang" not in p.read_text())


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_classes_add_up_on_every_example(example, tmp_path):
    out = tmp_path / "out"
    code = main(["predict", "--no-progress", "-c", str(example), "--output-dir", str(out), "--format", "json",
                 "--explain-misses", "--capture-per-request"])
    assert code == 0
    check_sums(out)
    check_gap(read_outputs_summary(out))


@pytest.mark.parametrize("name,blocks", [("conversation_trace.jsonl", 3000), ("synthetic_trace.jsonl", 1500)])
def test_classes_add_up_on_the_vendored_traces(name, blocks, tmp_path):
    rows = shared_trace(name).read_text().splitlines()[:150]
    (tmp_path / "slice.jsonl").write_text("\n".join(rows) + "\n")
    config = tmp_path / "t.yaml"
    config.write_text(mooncake_trace_config(tmp_path / "slice.jsonl", block_size=64, g1_blocks=blocks, replicas=2,
                                            host_blocks=blocks))
    out = tmp_path / "out"
    assert main(["predict", "--no-progress", "-c", str(config), "--output-dir", str(out), "--format", "json",
                 "--explain-misses", "--capture-per-request"]) == 0
    check_sums(out)
    summary = read_outputs_summary(out)
    assert summary["miss_classes"]["compulsory"] > 0
    check_gap(summary)


def test_a_concurrent_request_not_computed_yet_is_in_flight(tmp_path):
    # two data-parallel ranks, both prompts of 25 blocks arrive at 0; a pass schedules 64 tokens (16 blocks), so
    # when R1 is admitted on rank 1, rank 0 holds R0's first 16 blocks (placement) and R0 has not computed blocks
    # 16..23 yet: in flight (block 24 holds the last token)
    ids = list(range(1, 26))
    rows = [row(0, 100, 1, ids), row(0, 100, 1, ids)]
    config = aggregated_config({}, g1_blocks=64, parallelism="attention_data: 2")
    out = predict_scenario(tmp_path, rows, config, "f.yaml", "--explain-misses", "--capture-per-request")
    total, per_request = classes(out)
    assert per_request == [{"compulsory": 96, "last_block": 4}, {"placement": 64, "in_flight": 32, "last_block": 4}]
    # the ideal LRU of the ranks' 128 blocks hits R1's 24 lookup blocks; the replay none: the gap is those classes
    gap = read_outputs_summary(out)["miss_ratio_curve"]["gap"]
    assert gap["capacity_blocks"] == 128 and gap["ideal_lru_hit_tokens"] == 96 and gap["replay_hit_tokens"] == 0
    assert {k: v for k, v in gap["missed_by_replay"].items() if v} == {"placement": 64, "in_flight": 32}
    assert gap["hit_by_replay_only"] == 0
