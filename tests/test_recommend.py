"""`kvreplay recommend`: the search space of a config, candidates the rules reject, the SLA filter and the
Pareto front of a small sweep, and deploying its best plan."""
from __future__ import annotations

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.recommend import space

# One Qwen3-32B vLLM worker whose 300 fixed G1 blocks hold two 2,064-token requests at block 16 and
# three at block 64 (300 x 64 = 19,200 tokens), so block size, TP and concurrency all change the result.
SWEEP = """engine:
  model: Qwen/Qwen3-32B
  hardware: h200_sxm
  backend: vllm
  workers:
    aggregated:
      parallelism: {tensor: 2}
      kv_cache:
        block_size: {search: [16, 64]}
        capacity: {type: fixed, blocks: 300}
traffic:
  source: {type: synthetic, input_tokens: 2000, output_tokens: 64}
  load: {type: concurrency, concurrency: {search: [2, 8]}}
  stop: {requests: 16}
recommend:
  search:
    engine.workers.aggregated.parallelism: [{tensor: 1}, {tensor: 2}]
  sla: {ttft_ms: {p90: 400}}
"""
BLOCK = "engine.workers.aggregated.kv_cache.block_size"
PAR = "engine.workers.aggregated.parallelism"
CONC = "traffic.load.concurrency"


def sweep(tmp_path, text=SWEEP, *extra):
    config = tmp_path / "sweep.yaml"
    config.write_text(text)
    out = tmp_path / "out"
    code = main(["recommend", "-c", str(config), "--output-dir", str(out), *extra])
    return code, out


def test_space_lists_every_domain_in_place_or_in_the_search_block():
    document = {"engine": {"workers": {"aggregated": {"kv_cache": {
        "block_size": {"search": [16, 32, 64]},
        "capacity": {"type": "default", "memory_fraction": {"search": "0.80..0.95 step 0.05"}}}}}},
        "recommend": {"search": {PAR: [{"tensor": 1}, {"tensor": 2}]}}}
    concrete, domains = space.extract(document)
    assert domains == {BLOCK: [16, 32, 64], "engine.workers.aggregated.kv_cache.capacity.memory_fraction":
                       [0.8, 0.85, 0.9, 0.95], PAR: [{"tensor": 1}, {"tensor": 2}]}
    assert concrete["recommend"]["search"] == domains  # hoisted, so the compiler's recommend rules see them
    assert concrete["engine"]["workers"]["aggregated"]["kv_cache"]["block_size"] == 16
    combos = space.candidates(domains)
    assert len(combos) == 24 and combos[1] == {BLOCK: 16, "engine.workers.aggregated.kv_cache.capacity."
                                               "memory_fraction": 0.8, PAR: {"tensor": 2}}
    assert space.parse_range("16..64 step 16", "x") == [16, 32, 48, 64]


@pytest.mark.parametrize("domain, message", [("0.9..0.8 step 0.05", "LOW <= HIGH"), ("1..2", "is not a list"),
                                             ([], "empty"), (7, "not 7")])
def test_bad_domains_are_errors(domain, message):
    with pytest.raises(space.SpaceError, match=message):
        space.extract({"recommend": {"search": {BLOCK: domain}}})


def test_sla_filter_best_and_pareto_front(tmp_path, capsys):
    code, out = sweep(tmp_path)
    assert code == 0
    lines = [orjson.loads(line) for line in (out / "ledger.jsonl").read_bytes().splitlines()]
    assert [(e["index"], e["status"]) for e in lines] == [(i, "ok") for i in range(8)]
    per_gpu = [round(e["results"]["throughput_per_gpu"], 2) for e in lines]
    ttft = [round(e["results"]["p90_ttft_ms"], 2) for e in lines]
    # candidate order: block 16/64 x TP 1/2 x concurrency 2/8 (sorted paths, the last varying fastest)
    assert lines[5]["knobs"] == {BLOCK: 64, PAR: {"tensor": 1}, CONC: 8}
    # concurrency 8 (#5, #7) runs passes that prefill and decode: a prefill pass plus a decode pass each (facts §60)
    assert per_gpu == [75.8, 75.8, 61.11, 61.11, 75.8, 181.46, 61.11, 150.13]
    assert ttft == [357.26, 5423.41, 209.23, 3350.85, 357.26, 1442.01, 209.23, 839.36]
    result = orjson.loads((out / "recommendation.json").read_bytes())
    assert result["counts"] == {"ok": 8, "meets_sla": 4}
    assert result["best"]["index"] == 0  # 75.80 per GPU ties with #4; the lower index wins
    assert [e["index"] for e in result["pareto_front"]] == [0, 2, 4, 6]  # TP1: per GPU; TP2: per user
    assert [m["index"] for m in result["sla_misses"]] == [1, 3, 5, 7]
    assert result["sla_misses"][0]["misses"] == ["p90_ttft_ms 5423.41 > 400"]
    shown = capsys.readouterr().out
    assert 'best: #0 block_size=16, parallelism={"tensor":1}, concurrency=2: throughput_per_gpu 75.80' in shown
    # without the SLA the 3-request block-64 batch wins
    code, out = sweep(tmp_path, SWEEP.replace("  sla: {ttft_ms: {p90: 400}}\n", ""), "--overwrite")
    result = orjson.loads((out / "recommendation.json").read_bytes())
    assert result["best"]["index"] == 5 and [e["index"] for e in result["pareto_front"]] == [2, 3, 5, 6, 7]


def test_candidates_rejected_by_rules_are_listed_not_run(tmp_path):
    text = SWEEP.replace("[16, 64]", "[1, 64]").replace(
        "    engine.workers.aggregated.parallelism: [{tensor: 1}, {tensor: 2}]\n",
        "    engine.workers.aggregated.kv_cache.capacity.blocks: [300]\n")
    code, out = sweep(tmp_path, text)
    assert code == 1  # every candidate searches a fixed knob: none can run
    result = orjson.loads((out / "recommendation.json").read_bytes())
    assert result["counts"] == {"invalid": 4, "meets_sla": 0} and result["best"] is None
    codes = [sorted({e["code"] for e in r["errors"]}) for r in result["rejected"]]
    assert codes == [["G1-BLOCK-SIZE-MIN", "RECOMMEND-SEARCH-FIXED"]] * 2 + [["RECOMMEND-SEARCH-FIXED"]] * 2
    assert not (out / "best-plan.json").exists()


def test_predict_only_knobs_reject_every_candidate(tmp_path):
    text = SWEEP.replace("capacity: {type: fixed, blocks: 300}", "capacity: {type: fixed, bytes: 80000000000}")
    code, out = sweep(tmp_path, text)
    result = orjson.loads((out / "recommendation.json").read_bytes())
    assert code == 1 and all("RECOMMEND-PREDICT-ONLY" in {e["code"] for e in r["errors"]} for r in result["rejected"])
    assert len(result["rejected"]) == 8


def test_the_best_plan_deploys(tmp_path, capsys):
    code, out = sweep(tmp_path)
    capsys.readouterr()
    assert main(["deploy", str(out / "best-plan.json"), "--format", "json"]) == 0
    (role,) = orjson.loads(capsys.readouterr().out)["roles"]
    assert role["argv"][3:5] == ["--tensor-parallel-size", "1"]
    assert role["argv"][-5:] == ["--block-size", "16", "--num-gpu-blocks-override", "300",
                                 "--enable-prefix-caching"]


def test_config_errors_exit_2(tmp_path, capsys):
    code, _ = sweep(tmp_path, SWEEP.replace("recommend:\n", "other:\n"))
    assert code == 2
    code, _ = sweep(tmp_path, SWEEP.replace("sla: {ttft_ms: {p90: 400}}", "objective: fastest"))
    assert code == 2 and "recommend.objective: 'fastest' is not one of" in capsys.readouterr().err
