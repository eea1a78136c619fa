"""The deployment generator: every rule of the spec's "KV cache fields" section, as the exact arguments
generated for vLLM, SGLang and TensorRT-LLM."""
from __future__ import annotations

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.recommend.deploy import DeployError, generate
from tests.support import compile_yaml

TRAFFIC = "traffic: {source: {type: synthetic}, load: {type: concurrency, concurrency: 2}, stop: {requests: 4}}\n"


def plan_of(kv_cache: str, backend: str = "vllm", parallelism: str = "{tensor: 2}") -> dict:
    text = (f"engine:\n  model: Qwen/Qwen3-32B\n  hardware: h200_sxm\n  backend: {backend}\n"
            f"  workers:\n    aggregated:\n      parallelism: {parallelism}\n"
            f"      kv_cache: {kv_cache}\n" + TRAFFIC)
    result = compile_yaml(text)
    assert not result.diagnostics, result.diagnostics
    return orjson.loads(result.plan.canonical_json())


def argv(plan, engine):
    (launch,) = generate(plan, engine)
    return launch.argv, launch.files


def options(argv):
    return [word for word in argv if word.startswith("--")]


@pytest.mark.parametrize("kv", ["{capacity: {type: default, memory_fraction: 0.85}}",
                                "{block_size: null, capacity: {type: default, memory_fraction: 0.85}}"])
def test_absent_or_null_block_size_is_omitted(kv):
    plan = plan_of(kv)
    assert plan["engine"]["workers"]["aggregated"]["kv_cache"]["block_size"] == 64  # the simulation default
    vllm, _ = argv(plan, "vllm")
    assert vllm == ["vllm", "serve", "Qwen/Qwen3-32B", "--tensor-parallel-size", "2",
                    "--max-num-batched-tokens", "8192", "--max-num-seqs", "256",
                    "--gpu-memory-utilization", "0.85", "--enable-prefix-caching"]
    sglang, _ = argv(plan, "sglang")
    assert sglang == ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B", "--tp-size", "2",
                      "--chunked-prefill-size", "8192", "--max-running-requests", "256",
                      "--mem-fraction-static", "0.85"]
    trt, files = argv(plan, "trtllm")
    assert trt == ["trtllm-serve", "Qwen/Qwen3-32B", "--tp_size", "2", "--pp_size", "1", "--max_batch_size", "256",
                   "--max_num_tokens", "8192", "--extra_llm_api_options", "aggregated-extra-llm-api-options.yaml"]
    assert files == {"aggregated-extra-llm-api-options.yaml":
                     "kv_cache_config:\n  enable_block_reuse: true\n  free_gpu_memory_fraction: 0.85\n"}


def test_explicit_block_size_is_kept():
    plan = plan_of("{block_size: 16, capacity: {type: default, memory_fraction: 0.9}}")
    vllm, _ = argv(plan, "vllm")
    assert vllm[vllm.index("--block-size") + 1] == "16"
    sglang, _ = argv(plan, "sglang")
    assert sglang[sglang.index("--page-size") + 1] == "16"
    _, files = argv(plan, "trtllm")
    assert files["aggregated-extra-llm-api-options.yaml"] == (
        "kv_cache_config:\n  enable_block_reuse: true\n  free_gpu_memory_fraction: 0.9\n  tokens_per_block: 16\n")


def test_fixed_blocks_go_to_vllm_directly_without_a_block_size():
    plan = plan_of("{capacity: {type: fixed, blocks: 2499}}")
    vllm, _ = argv(plan, "vllm")
    assert "--block-size" not in vllm and "--gpu-memory-utilization" not in vllm
    assert vllm[vllm.index("--num-gpu-blocks-override") + 1] == "2499"


@pytest.mark.parametrize("engine, name", [("sglang", "SGLang"), ("trtllm", "TensorRT-LLM")])
def test_fixed_blocks_need_an_explicit_block_size_for_token_engines(engine, name):
    plan = plan_of("{block_size: null, capacity: {type: fixed, blocks: 2499}}")
    with pytest.raises(DeployError) as error:
        generate(plan, engine)
    assert str(error.value).startswith(f"engine.workers.aggregated.kv_cache.capacity.blocks: {name} takes a "
                                       "token capacity")
    assert "engine.workers.aggregated.kv_cache.block_size" in str(error.value)


def test_fixed_blocks_become_tokens_with_an_explicit_block_size():
    plan = plan_of("{block_size: 32, capacity: {type: fixed, blocks: 2499}}")
    sglang, _ = argv(plan, "sglang")
    assert sglang[-4:] == ["--page-size", "32", "--max-total-tokens", "79968"]  # 2499 x 32
    _, files = argv(plan, "trtllm")
    assert files["aggregated-extra-llm-api-options.yaml"] == (
        "kv_cache_config:\n  enable_block_reuse: true\n  max_tokens: 79968\n  tokens_per_block: 32\n")


def test_prefix_caching_off_maps_to_each_engines_flag():
    plan = plan_of("{block_size: 32, prefix_caching: false}")
    assert "--no-enable-prefix-caching" in argv(plan, "vllm")[0]
    assert "--disable-radix-cache" in argv(plan, "sglang")[0]
    assert "enable_block_reuse: false" in argv(plan, "trtllm")[1]["aggregated-extra-llm-api-options.yaml"]


def test_host_offload_maps_to_each_engines_cpu_cache():
    plan = plan_of("{block_size: 16, capacity: {type: fixed, blocks: 2499}, host_offload: {num_host_blocks: 4096}}")
    vllm, _ = argv(plan, "vllm")
    assert orjson.loads(vllm[vllm.index("--kv-transfer-config") + 1]) == {
        "kv_connector": "OffloadingConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"num_cpu_blocks": 4096}}
    # 4096 blocks x 16 tokens x 131,072 B (Qwen3-32B bf16 at TP2) = 8.59 GB
    sglang, _ = argv(plan, "sglang")
    assert sglang[-3:] == ["--enable-hierarchical-cache", "--hicache-size", "9"]
    assert "host_cache_size: 8589934592\n" in argv(plan, "trtllm")[1]["aggregated-extra-llm-api-options.yaml"]


def pd_plan(kv: str) -> dict:
    text = ("engine:\n  model: Qwen/Qwen3-32B\n  hardware: h200_sxm\n  backend: vllm\n  mode: disaggregated\n"
            f"  workers:\n    prefill:\n      kv_cache: {kv}\n    decode:\n      kv_cache: {kv}\n" + TRAFFIC)
    result = compile_yaml(text)
    assert not result.diagnostics, result.diagnostics
    return orjson.loads(result.plan.canonical_json())


def test_pd_flags_per_engine():
    plan = pd_plan("{block_size: 16}")
    prefill, decode = generate(plan, "vllm")
    assert (prefill.role, decode.role) == ("prefill", "decode")
    assert prefill.argv[-2:] == ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
    prefill, decode = generate(plan, "sglang")
    assert prefill.argv[-4:] == ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"]
    assert decode.argv[-4:] == ["--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl"]
    prefill, _ = generate(plan, "trtllm")
    assert prefill.files["prefill-extra-llm-api-options.yaml"].startswith(
        "cache_transceiver_config:\n  backend: DEFAULT\nkv_cache_config:\n")


def test_pd_with_host_offload_combines_connectors_on_vllm():
    plan = pd_plan("{block_size: 16, host_offload: {num_host_blocks: 100}}")
    prefill, _ = generate(plan, "vllm")
    config = orjson.loads(prefill.argv[prefill.argv.index("--kv-transfer-config") + 1])
    assert config["kv_connector"] == "MultiConnector"
    assert [c["kv_connector"] for c in config["kv_connector_extra_config"]["connectors"]] == [
        "NixlConnector", "OffloadingConnector"]


def test_attention_dp_counts_every_rank_on_sglang_and_trtllm():
    plan = plan_of("{block_size: 32}", parallelism="{tensor: 2, attention_data: 4}")
    vllm, _ = argv(plan, "vllm")
    assert vllm[3:7] == ["--tensor-parallel-size", "2", "--data-parallel-size", "4"]
    sglang, _ = argv(plan, "sglang")
    assert sglang[5:10] == ["--tp-size", "8", "--dp-size", "4", "--enable-dp-attention"]
    trt, files = argv(plan, "trtllm")
    assert trt[2:4] == ["--tp_size", "8"] and "enable_attention_dp: true\n" in files[
        "aggregated-extra-llm-api-options.yaml"]


def test_cli_deploy_reads_a_plan_or_a_config(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("engine:\n  model: Qwen/Qwen3-32B\n  hardware: h200_sxm\n  backend: sglang\n"
                      "  workers:\n    aggregated:\n      kv_cache: {capacity: {type: fixed, blocks: 10}}\n" + TRAFFIC)
    assert main(["deploy", str(config)]) == 1
    assert "needs an explicit engine.workers.aggregated.kv_cache.block_size" in capsys.readouterr().err
    assert main(["compile", str(config), "-o", str(tmp_path / "plan.json"),
                 "--set", "engine.workers.aggregated.kv_cache.block_size=16"]) == 0
    assert main(["deploy", str(tmp_path / "plan.json"), "--format", "json", "-o", str(tmp_path / "out")]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["engine"] == "sglang" and body["roles"][0]["argv"][-4:] == [
        "--page-size", "16", "--max-total-tokens", "160"]
    assert (tmp_path / "out" / "aggregated.sh").read_text().startswith("#!/bin/sh\npython -m sglang.launch_server")
