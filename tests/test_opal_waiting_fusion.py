"""Fused decode passes while requests wait for blocks (shell/macro.py `_keeps_waiting`) on an opal worker with APC:
every output file is byte for byte what single stepping writes, with and without a TTL, and passes were fused."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvreplay.cli import main
from kvreplay.runtime.shell import macro

from .support import EXAMPLES


def trace_rows() -> list[dict]:
    """40 requests of 5,120 to 9,728 prompt tokens, 50 ms apart, sharing a first 512-token chunk in groups of
    four: G1 (36 GB: 8,511 blocks of 16) holds about 15 prompts, so later ones wait while others decode."""
    rows = []
    for i in range(40):
        chunks = 10 + i % 10
        hashes = [1000 + i % 4] + [10_000 + 100 * i + k for k in range(chunks - 1)]
        rows.append({"timestamp": 50 * i, "input_length": 512 * chunks, "output_length": 60 + 37 * (i % 7),
                     "hash_ids": hashes})
    return rows


def config(folder: Path, ttl: float) -> Path:
    shutil.copytree(EXAMPLES / "opal" / "model-configs", folder / "model-configs", dirs_exist_ok=True)
    trace = folder / "trace.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in trace_rows()))
    body = {
        "simulation": {"simulation_time": -1, "seed": 7, "num_workers": 1},
        "model": {"model_params": {"name": "granite-3.3-8b-instruct", "config_dir": "./model-configs/"}},
        "router": {"router_params": {"policy": "RoundRobin", "enable_scaling": False}},
        "workload": {"stages": [{"type": "trace", "workload_params": {
            "trace_file": str(trace), "chunk_size": 512, "multiplier_to_sec": 0.001, "total_requests": -1}}]},
        "worker": {"hw": {"gpu": "H100", "memory_gb": 36, "tflops": 989.5, "mem_bw_TBps": 3.3, "tp": 1},
                   "vllm_params": {"max_num_seqs": 256, "max_num_batched_tokens": 8192, "chunked_prefill": True,
                                   "block_size": 16, "enable_gpu_apc": True, "apc_lru_ttl": ttl},
                   "inference_params": {"model": "roofline"}},
        "kvc": {"kvc_tiers": ["CPUMemory"], "chunk_size": 16, "save_unfull_chunk": True,
                "CPUMemory": {"bandwidth_GBps": 50, "latency_nsec": 200, "concurrency": 1000000,
                              "capacity_GB": 0.5}},
    }
    path = folder / "opal.json"
    path.write_text(json.dumps(body))
    return path


def outputs(folder: Path, config_path: Path, *flags: str) -> dict[str, bytes]:
    """Every file a run writes, by relative path (the output folder's name, which the log repeats, made neutral)."""
    out = folder / "out"
    assert main(["predict", "--no-progress", "-c", str(config_path), "--output-dir", str(out), "--format", "json",
                 "--overwrite", "--capture-per-request", *flags]) == 0
    return {str(p.relative_to(out)): p.read_bytes().replace(str(out).encode(), b"OUT")
            for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("ttl", [0, 0.5, 20])
def test_passes_fused_while_requests_wait_write_what_single_steps_write(tmp_path, monkeypatch, ttl):
    path = config(tmp_path, ttl)
    single = outputs(tmp_path / "single", path, "--single-step")
    held = []
    plan = macro.plan

    def counting(*args):
        fused = plan(*args)
        if fused is not None and fused.held:
            held.append(len(fused.ends))
        return fused

    monkeypatch.setattr(macro, "plan", counting)
    fused = outputs(tmp_path / "fused", path)
    assert sorted(fused) == ["prediction.json", "requests.jsonl", "sim_config.json", "simulation.log",
                             "stage_0/opal_stats.json"]
    assert fused == single
    assert len(held) > 10 and sum(held) > 2 * len(held)  # runs of decode passes while a request waited
    summary = json.loads(fused["prediction.json"])
    assert summary["completed_requests"] == 40
