"""`kvreplay predict` on opal configs, end to end: the shipped configs, APC on and off, the tier chain, and opal's
own files (sim_config.json, simulation.log, stage_N/opal_stats.json), byte for byte the same on every run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.runtime.outputs.metrics import FIRST_KEY

from .support import EXAMPLES, ROOT

OPAL = EXAMPLES / "opal"
APC_OFF = ("--set", "worker.vllm_params.enable_gpu_apc=false")


def rates(stage: dict) -> dict:
    return {hit["tier"]: hit["rate"] for hit in stage["tier_hits"]}


def predict(tmp_path: Path, config: str, *flags: str) -> tuple[dict, Path]:
    out = tmp_path / "out"
    code = main(["predict", "--no-progress", "-c", str(OPAL / config), "--output-dir", str(out), "--format",
                 "json", "--overwrite", "--capture-per-request", *flags])
    assert code == 0
    return orjson.loads((out / "prediction.json").read_bytes()), out


@pytest.fixture(scope="module")
def apc_on(tmp_path_factory):
    return predict(tmp_path_factory.mktemp("on"), "defaults_apc.json")


@pytest.fixture(scope="module")
def apc_off(tmp_path_factory):
    return predict(tmp_path_factory.mktemp("off"), "defaults_apc.json", *APC_OFF)


def test_the_shipped_apc_config_runs_both_stages(apc_on):
    summary, _ = apc_on
    uniform, otel = summary["stages"]
    assert (uniform["type"], uniform["queued_requests"], uniform["finished_requests"]) == ("RateStage", 100, 100)
    assert (otel["type"], otel["queued_requests"], otel["finished_requests"]) == ("OtelStage", 15, 15)
    assert otel["stage_time_start_s"] == uniform["stage_time_end_s"]  # the otel stage starts when the first ends


def test_uniform_stage_with_apc_hits_from_apc_and_without_it_from_cpu_memory(apc_on, apc_off):
    """opal measured 96.8% from APC and 1.2% from CPUMemory with APC on, 97.9% from CPUMemory with it off, and a
    higher TTFT without APC: any two prompts of this stage share min(n, m) tokens."""
    on, off = apc_on[0]["stages"][0], apc_off[0]["stages"][0]
    assert on["prefix_hit_rate"] == rates(on)["apc"] == 854496 / 871662  # 98.0%
    assert rates(on)["CPUMemory"] == 0.0  # APC never evicts at 26,534 blocks
    assert on["hit_types"] == {"apc": 99, "tiered": 0, "none": 1}
    # 96.8%: which CPU-tier copies a prompt finds depends on the passes' times (the default timing prices a pass that
    # prefills and decodes as a prefill pass plus a decode pass, facts §60; 844,880 tokens before)
    assert off["prefix_hit_rate"] == rates(off)["CPUMemory"] == 843456 / 871662
    assert rates(off)["apc"] == 0.0 and off["hit_types"] == {"apc": 0, "tiered": 96, "none": 4}  # 97 / 3 before
    assert off["mean_ttft_ms"] > 2 * on["mean_ttft_ms"]  # 59.2 ms against 25.3: the prefix comes over PCIe
    assert on["retirement_stores"] == off["retirement_stores"] == 100


@pytest.mark.parametrize("config, flags", [("defaults_apc.json", ()), ("defaults_apc.json", APC_OFF),
                                           ("defaults.json", ()), ("three_tiers.json", ()), ("ttl.json", ())])
def test_per_tier_hit_rates_add_up_to_the_prefix_hit_rate(tmp_path, config, flags):
    summary, out = predict(tmp_path, config, *flags)
    for stage in summary["stages"]:
        assert sum(hit["tokens"] for hit in stage["tier_hits"]) == stage["prefix_hit_tokens"]
        assert sum(rates(stage).values()) == pytest.approx(stage["prefix_hit_rate"], abs=1e-12)
        assert [hit["tier"] for hit in stage["tier_hits"]][0] == "apc"
    records = [orjson.loads(line) for line in (out / "requests.jsonl").read_bytes().splitlines()]
    assert all(min(record) == FIRST_KEY for record in records)  # (opal's records too: RecordSpool's first_key)
    for stage in summary["stages"]:
        mine = [r for r in records if r["stage"] == stage["stage"]]
        assert sum(sum(r["tier_hit_tokens"].values()) for r in mine) == stage["prefix_hit_tokens"]


def test_three_tiers_spill_into_local_nvme_and_the_shared_store_and_serve_from_there(tmp_path):
    summary, _ = predict(tmp_path, "three_tiers.json")
    (stage,) = summary["stages"]
    tiers = summary["kvc_tiers"]
    assert set(tiers) == {"CPUMemory", "LocalNVMe", "DistributedFS"}
    # CPUMemory (2 GB per worker, 819 chunks of 16 tokens) and LocalNVMe (16 GB) fill up; the rest reaches the store
    assert tiers["CPUMemory"]["resident_blocks"] == tiers["CPUMemory"]["capacity_blocks"] == 2 * 819
    assert tiers["LocalNVMe"]["resident_blocks"] == tiers["LocalNVMe"]["capacity_blocks"] == 2 * 6553
    assert tiers["DistributedFS"]["scope"] == "cluster_shared" and tiers["DistributedFS"]["stores"] == 1
    assert [hit["tier"] for hit in stage["tier_hits"]] == ["apc", "CPUMemory", "LocalNVMe", "DistributedFS"]
    assert rates(stage)["LocalNVMe"] > 0 and rates(stage)["DistributedFS"] > 0
    assert stage["write_through_stores"] > 0 and stage["evictions"]["inline"] > 0


def test_a_ttl_keeps_blocks_and_the_monitor_evicts_proactively(tmp_path):
    summary, _ = predict(tmp_path, "ttl.json")
    (stage,) = summary["stages"]
    assert stage["evictions"]["proactive"] > 0 and stage["evictions"]["ttl_skipped"] > 0
    assert stage["demotions"] > 0  # CPUMemory's LRU (a kvreplay extension) evicts, with nowhere to demote to
    assert stage["dropped_chunks"] >= stage["demotions"]


def test_opal_files_sim_config_log_and_stage_stats(apc_on):
    _, out = apc_on
    config = json.loads((OPAL / "defaults_apc.json").read_text())
    for stage in config["workload"]["stages"]:
        stage["workload_params"].setdefault("total_requests", -1)
        stage["workload_params"].setdefault("time_duration_sec", -1)
    assert (out / "sim_config.json").read_text() == json.dumps(config, indent=4)
    log = (out / "simulation.log").read_text().splitlines()
    assert log[1] == ("INFO [   0.0 s](kvreplay:0): GPU memory blocks initialized: tp_degree=1, per_gpu_memory=80GB, "
                      "total_memory=80GB, model_size=15.22GB, free_memory=64.78GB, block_size=16 tokens, "
                      "block_size_bytes=2560.00KB, total_blocks=26534")
    assert log[2] == ("INFO [   0.0 s](kvreplay:0): GPU APC enabled: policy=LRUPolicy, block_size=16, kvc_chunk=16, "
                      "blocks_per_victim=1, ttl=0")
    assert "Stating the execution of stage 1 with type: Workload(otel " \
           "synthetic_otel_traces-pretokenized.jsonl)" in "\n".join(log)
    assert sum("retired on worker.0" in line for line in log) == 115
    assert "===== stage_0 =====" in log and "*" + "-" * 50 in log
    stats = json.loads((out / "stage_0" / "opal_stats.json").read_text())
    assert list(stats) == ["bins", "total_latency", "raw_latency_values", "raw_queuing_values", "raw_kvc_io_time",
                           "raw_kvc_hit_tokens", "raw_gpu_time", "raw_ttft_values", "raw_decode_values", "debug_val",
                           "finished_requests", "queued_requests", "failed_requests", "per_unit_throughput",
                           "per_unit_workers", "per_unit_gpu_utilization", "latencies", "stage_time_start",
                           "stage_time_end", "input_output_tokens_sz", "kvc_tier_tokens"]
    assert stats["bins"][0] == 1000 and len(stats["bins"]) == 14
    assert (stats["finished_requests"], stats["queued_requests"], len(stats["raw_ttft_values"])) == (100, 100, 100)
    assert stats["kvc_tier_tokens"] == {"apc": 854496, "Cache Miss": 871662 - 854496}
    # one entry per whole second of the stage (it ends at 50.45 s): the last request finished after the last one
    assert len(stats["per_unit_throughput"]) == 50 and sum(stats["per_unit_throughput"]) == 99
    text = (out / "stage_0" / "opal_stats.json").read_text()
    assert text.startswith('{\n    "bins": [1000, 2000, ') and text.endswith("\n}")  # opal's layout


def test_outputs_are_byte_identical_across_runs_and_hash_seeds(tmp_path):
    outputs = []
    for seed in ("0", "4242"):
        out = tmp_path / f"run-{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-m", "kvreplay", "predict", "--no-progress", "-c",
                        str(OPAL / "three_tiers.json"), "--output-dir", str(out), "--capture-per-request"],
                       check=True, env=env, cwd=ROOT, capture_output=True)
        outputs.append({path.relative_to(out): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()})
    names = {str(p) for p in outputs[0]}
    assert {"prediction.json", "requests.jsonl", "sim_config.json", "simulation.log",
            "stage_0/opal_stats.json"} <= names
    # (the log names the output folder, which differs here)
    for name in outputs[0]:
        first, second = outputs[0][name], outputs[1][name]
        if str(name) == "simulation.log":
            first, second = first.replace(b"run-0", b"run-X"), second.replace(b"run-4242", b"run-X")
        assert first == second, name


def test_an_opal_run_goes_to_opal_s_folder_by_default(tmp_path):
    code = subprocess.run([sys.executable, "-m", "kvreplay", "predict", "--no-progress", "-c",
                           str(OPAL / "defaults.json")], cwd=tmp_path, capture_output=True).returncode
    assert code == 0
    (run,) = (tmp_path / "simulation-runs").iterdir()
    assert run.name.startswith("sim-") and len(run.name) == len("sim-26-12-02_01_52_00")
    assert {p.name for p in run.iterdir()} >= {"prediction.json", "sim_config.json", "simulation.log", "stage_0"}


def test_scaling_adds_workers_after_the_latency_and_the_log_says_so(tmp_path):
    summary, out = predict(tmp_path, "defaults_apc.json", "--set", "router.router_params.enable_scaling=true",
                           "--set", "router.router_params.max_queue_threshold=1", "--set",
                           "router.router_params.scale_latency=2", "--set", "router.router_params.max_workers=3",
                           "--set", "router.router_params.policy=LeastLoaded")
    periods = [(w["periods"][0]["joined_ms"], w["periods"][0]["ready_ms"]) for w in summary["workers"]]
    # the checks at 1 s and 4 s saw more than one outstanding request; each worker takes requests 2 s later
    assert periods == [(0.0, 0.0), (1000.0, 3000.0), (4000.0, 6000.0)]
    log = (out / "simulation.log").read_text()
    assert "Created 1 workers" in log and log.count("GPU memory blocks initialized") == 1
    assert "INFO [   1.0 s](kvreplay:0): ** adding 1 workers, so far now 2" in log
    assert "INFO [   4.0 s](kvreplay:0): ** adding 1 workers, so far now 3" in log
