"""`parallelism.preset: true` in recommend: the built-in worker-size ladder, its clash with a search of the same
shape, MoE widths, and the `recommend.max_gpus` budget."""
from __future__ import annotations

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.recommend import space

PAR = "engine.workers.aggregated.parallelism"

# Qwen3-32B, fixed timing 50 / 10 ms: a request of 16 output tokens takes 50 + 15 x 10 = 200 ms whatever the
# shape, and 4 requests at concurrency 2 end at 400 ms: 64 tokens / 0.4 s = 160 tokens/s for the deployment.
LADDER = """engine:
  model: {model}
  hardware: h200_sxm
  backend: vllm
  workers:
    aggregated:
      parallelism: {{preset: true, replicas: {replicas}}}
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache:
        block_size: 64
        capacity: {capacity}
traffic:
  source: {{type: synthetic, input_tokens: 2000, output_tokens: 16}}
  load: {{type: concurrency, concurrency: 2}}
  stop: {{requests: 4}}
recommend:
  max_gpus: {budget}
"""


def recommend(tmp_path, **knobs) -> tuple[int, list[dict]]:
    values = {"model": "Qwen/Qwen3-32B", "replicas": 1, "capacity": "{type: fixed, blocks: 300}", "budget": 4}
    tmp_path.mkdir(exist_ok=True)
    config = tmp_path / "ladder.yaml"
    config.write_text(LADDER.format(**{**values, **knobs}))
    code = main(["recommend", "-c", str(config), "--output-dir", str(tmp_path / "out"), "--no-progress"])
    return code, [orjson.loads(line) for line in (tmp_path / "out" / "ledger.jsonl").read_bytes().splitlines()]


def test_the_ladder_is_five_worker_sizes_with_the_roles_other_knobs_kept():
    document = {"engine": {"model": "Qwen/Qwen3-32B", "workers": {"aggregated": {
        "parallelism": {"preset": True, "replicas": 2, "attention_data": 1}}}}, "recommend": {}}
    _, domains = space.extract(document)
    assert domains == {PAR: [{"replicas": 2, "attention_data": 1, "tensor": t, "pipeline": 1}
                             for t in (1, 2, 4, 8, 16)]}


def test_a_moe_models_experts_spread_over_the_workers_gpus():
    document = {"engine": {"model": "deepseek-ai/DeepSeek-V3", "workers": {"aggregated": {
        "parallelism": {"preset": True, "attention_data": 2}}}}, "recommend": {}}
    _, domains = space.extract(document)
    assert [(s["tensor"], s["moe_tensor"], s["moe_expert"]) for s in domains[PAR]] == \
        [(1, 1, 2), (2, 1, 4), (4, 1, 8), (8, 1, 16), (16, 1, 32)]  # moe_tensor x moe_expert = tensor x DP


@pytest.mark.parametrize("search", [{"search": {PAR: [{"tensor": 1}]}}, {"search": {PAR + ".tensor": [1, 2]}}])
def test_a_preset_and_a_search_of_the_same_shape_clash(search):
    document = {"engine": {"workers": {"aggregated": {"parallelism": {"preset": True}}}}, "recommend": search}
    with pytest.raises(space.SpaceError, match="preset: true searches the shape itself"):
        space.extract(document)


def test_preset_false_or_unset_searches_nothing_by_itself():
    for preset in ({"preset": False}, {}):
        document = {"engine": {"workers": {"aggregated": {"parallelism": preset}}}, "recommend": {}}
        with pytest.raises(space.SpaceError, match="names no knob"):
            space.extract(document)


def test_candidates_over_the_gpu_budget_are_listed_not_run(tmp_path):
    code, lines = recommend(tmp_path)
    assert code == 0
    assert [(e["knobs"][PAR]["tensor"], e["status"]) for e in lines] == \
        [(1, "ok"), (2, "ok"), (4, "ok"), (8, "over_budget"), (16, "over_budget")]
    assert [e["results"]["gpus"] for e in lines[:3]] == [1, 2, 4]
    assert [e["results"]["throughput_per_gpu"] for e in lines[:3]] == [160.0, 80.0, 40.0]
    assert lines[3]["errors"][0]["message"] == "the candidate uses 8 GPUs; recommend.max_gpus is 4"
    assert "results" not in lines[3]
    # two replicas double every shape's GPUs: only TP1 and TP2 fit in 4
    code, lines = recommend(tmp_path / "r2", replicas=2)
    assert [e["status"] for e in lines] == ["ok", "ok", "over_budget", "over_budget", "over_budget"]


def test_shapes_the_model_cannot_take_are_invalid(tmp_path):
    """DeepSeek-V3 (FP8, about 690 GB of weights) leaves no KV room on 1, 2 or 4 H200s (141 GB each); TP8 runs."""
    code, lines = recommend(tmp_path, model="deepseek-ai/DeepSeek-V3", capacity="{type: default}", budget=8)
    assert code == 0
    assert [e["status"] for e in lines] == ["invalid", "invalid", "invalid", "ok", "over_budget"]
    assert {err["code"] for e in lines[:3] for err in e["errors"]} == {"G1-CAPACITY-EMPTY"}
