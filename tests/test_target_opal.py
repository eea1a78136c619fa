"""`--to opal` and `--to predict`: predict configs as opal configs and back, and what does not carry over.

The round trip predict -> opal -> predict keeps every field opal can express (workers, TP, scheduler, G1 in
blocks, prefix caching, G2 as CPUMemory, G3 as LocalNVMe/DistributedFS, the model, the hardware, the
requests with their arrival times and prefixes); the opal config written validates and predicts in kvreplay.
"""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from ruamel.yaml import YAML

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file

from .golden import golden_extension
from .support import EXAMPLES, read_outputs

ROUND_TRIP = {
    "host-offload-prediction": ["traffic.stop.sessions=4"],  # G2, closed-loop sessions
    "g3-storage": ["traffic.stop.sessions=6"],  # G2 + a shared G3, four workers
    "g1-default-capacity": ["traffic.stop.requests=40"],  # G1 from GPU memory, poisson, two workers
    "mooncake-trace": ["traffic.stop.max_virtual_time_seconds=20"],  # a Mooncake trace (fixed timing: dropped)
}
ROLE = ("engine", "workers", "aggregated")


def to_opal(name: str, out: Path, overrides=(), strict=False) -> int:
    sets = [arg for override in overrides for arg in ("--set", override)]
    return main(["compile", str(EXAMPLES / f"{name}.yaml"), "--to", "opal", "-o", str(out), *sets,
                 *(["--strict"] if strict else [])])


def dig(node, *path):
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def expressible(plan: dict) -> dict:
    """The fields of a plan opal can express."""
    role = dig(plan, *ROLE)
    kv = role["kv_cache"]
    host, g3 = kv.get("host_offload", {}), kv.get("g3_offload", {})
    return {
        "model": plan["engine"]["model"], "hardware": plan["engine"]["hardware"],
        "chunked_prefill": plan["engine"]["enable_chunked_prefill"],
        "workers": (role["parallelism"]["replicas"], role["parallelism"]["tensor"]),
        "scheduler": (role["scheduler"]["max_batched_tokens"], role["scheduler"]["max_sequences"]),
        "g1": (kv["block_size"], kv["prefix_caching"], plan["geometry"]["aggregated"]["g1_blocks"], kv["bytes_per_token"]),
        "g2": tuple(host.get(k) for k in ("num_host_blocks", "h2d_bandwidth_gbps", "latency_to_first_byte_ms")),
        "g3": tuple(g3.get(k) for k in ("num_g3_blocks", "read_bandwidth_gbps", "latency_to_first_byte_ms", "scope")),
    }


def requests(out_dir: Path) -> list[tuple]:
    _, records = read_outputs(out_dir)
    return sorted((round(r["arrival_time_ms"], 6), r["input_length"], r["requested_output_length"]) for r in records)


@pytest.mark.parametrize("name", sorted(ROUND_TRIP))
def test_predict_to_opal_to_predict_keeps_what_opal_can_express(name, tmp_path, capsys):
    sets = ROUND_TRIP[name]
    assert to_opal(name, tmp_path / "opal" / "config.json", sets) == 0
    assert main(["validate", str(tmp_path / "opal" / "config.json")]) == 0
    back = tmp_path / "back.yaml"
    assert main(["compile", str(tmp_path / "opal" / "config.json"), "--to", "predict", "-o", str(back)]) == 0
    capsys.readouterr()
    original = compile_file(EXAMPLES / f"{name}.yaml", sets)
    again = compile_file(back)
    assert again.ok, again.diagnostics
    assert expressible(again.plan.to_dict()) == expressible(original.plan.to_dict())
    # the requests: the same arrival times and lengths (closed loops at the times kvreplay's replay gave them)
    for config, out in ((EXAMPLES / f"{name}.yaml", "a"), (tmp_path / "opal" / "config.json", "o"), (back, "b")):
        extra = [arg for s in sets for arg in ("--set", s)] if out == "a" else []
        assert main(["predict", "-c", str(config), "--output-dir", str(tmp_path / out), "--capture-per-request",
                     "--no-progress", *extra]) == 0
    capsys.readouterr()
    summary, _ = read_outputs(tmp_path / "b")
    if summary["incomplete_requests"]:  # a time limit cut the run: requests still in flight have no record
        assert summary["num_requests"] == read_outputs(tmp_path / "o")[0]["num_requests"]
        arrivals = {(t, n) for t, n, _ in requests(tmp_path / "o")}
        assert len(arrivals & {(t, n) for t, n, _ in requests(tmp_path / "b")}) > 0.9 * len(arrivals)
    else:
        assert requests(tmp_path / "b") == requests(tmp_path / "o")
    if name != "mooncake-trace":  # (the trace's own rows, cut at 20 s in the first run only by arrival)
        assert requests(tmp_path / "b") == requests(tmp_path / "a")


def test_an_open_loop_config_predicts_the_same_after_the_round_trip(tmp_path, capsys):
    """Poisson arrivals, no shared prefixes, roofline timing: the predict YAML that comes back gives the same
    summary as the original (the opal config itself runs opal's APC, so it differs in the last digits)."""
    sets = ROUND_TRIP["g1-default-capacity"]
    to_opal("g1-default-capacity", tmp_path / "opal.json", sets)
    main(["compile", str(tmp_path / "opal.json"), "--to", "predict", "-o", str(tmp_path / "back.yaml")])
    main(["predict", "-c", str(EXAMPLES / "g1-default-capacity.yaml"), "--output-dir", str(tmp_path / "a"),
          "--capture-per-request", "--no-progress", *[a for s in sets for a in ("--set", s)]])
    main(["predict", "-c", str(tmp_path / "back.yaml"), "--output-dir", str(tmp_path / "b"), "--capture-per-request",
          "--no-progress"])
    capsys.readouterr()
    (original, _), (back, _) = read_outputs(tmp_path / "a"), read_outputs(tmp_path / "b")
    assert back["completed_requests"] == original["completed_requests"] == 40
    assert back["mean_ttft_ms"] == original["mean_ttft_ms"] and back["mean_tpot_ms"] == original["mean_tpot_ms"]


GOLDEN_OPAL = ("g1-default-capacity", "g3-storage", "host-offload-prediction", "kvcr-peer-fetch", "mooncake-trace")


@pytest.mark.parametrize("name", GOLDEN_OPAL)
def test_opal_outputs_are_golden(name, tmp_path, snapshot, capsys):
    assert to_opal(name, tmp_path / "c.json") == 0
    err = capsys.readouterr().err
    config = orjson.loads((tmp_path / "c.json").read_bytes())
    model = orjson.loads(next((tmp_path / "model-configs").glob("*/config.json")).read_bytes())
    rows = [orjson.loads(line) for line in (tmp_path / "traces" / "c.jsonl").read_bytes().splitlines()]
    dropped = [line.split(": ", 1)[1] for line in err.splitlines() if "warning[TARGET-DROPPED]" in line]
    golden = snapshot.use_extension(golden_extension("targets/opal"))(name=name)
    assert {"config": config, "model_config": model, "trace_rows": len(rows), "first_rows": rows[:2],
            "dropped": dropped} == golden


def test_g1_travels_as_the_memory_whose_opal_pool_is_g1(tmp_path, capsys):
    assert to_opal("host-offload-prediction", tmp_path / "c.json") == 0
    capsys.readouterr()
    opal = compile_file(tmp_path / "c.json").plan.to_dict()
    assert opal["geometry"]["aggregated"]["g1_blocks"] == 2499
    assert opal["opal"]["derived"]["total_gpu_blocks"] == 2499
    config = orjson.loads((tmp_path / "c.json").read_bytes())
    assert config["kvc"]["CPUMemory"]["capacity_GB"] == 8.0  # 4,096 blocks x 16 tokens x 131,072 B
    assert config["worker"]["hw"]["tflops"] == 1978.0  # H200's FP8 rate, for FP8 weights


def test_what_opal_cannot_express_is_refused_or_listed(tmp_path, capsys):
    assert to_opal("disaggregated-pd", tmp_path / "pd.json") == 2
    assert "opal has aggregated workers only" in capsys.readouterr().err
    assert to_opal("sglang-default-capacity", tmp_path / "s.json") == 2
    assert "a sglang config has no opal form" in capsys.readouterr().err
    assert to_opal("scaled-workers", tmp_path / "w.json", strict=True) == 1
    err = capsys.readouterr().err
    assert "error[TARGET-DROPPED] engine.workers.aggregated.scaling" in err and "error[TARGET-DROPPED] " \
           "engine.workers.aggregated.timing" in err and not (tmp_path / "w.json").exists()
    assert main(["compile", str(EXAMPLES / "g1-default-capacity.yaml"), "--to", "opal"]) == 2
    assert "give -o CONFIG.json" in capsys.readouterr().err


OPAL_EXAMPLES = ("defaults", "defaults_apc", "three_tiers", "ttl")


@pytest.mark.parametrize("name", OPAL_EXAMPLES)
def test_opal_examples_as_predict_configs_are_golden(name, tmp_path, snapshot, capsys):
    out = tmp_path / f"{name}.yaml"
    assert main(["compile", str(EXAMPLES / "opal" / f"{name}.json"), "--to", "predict", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    document = YAML(typ="safe", pure=True).load(out.read_text())
    paths = dig(document, "traffic", "source", "paths")
    assert all((out.parent / p).is_file() for p in paths)
    document["traffic"]["source"]["paths"] = [Path(p).name for p in paths]  # (relative to tmp_path: not portable)
    assert compile_file(out).ok
    dropped = [line.split(": ", 1)[1] for line in err.splitlines() if "TARGET-DROPPED" in line]
    golden = snapshot.use_extension(golden_extension("targets/predict"))(name=name)
    assert {"predict": document, "dropped": dropped} == golden


def test_a_trace_stage_is_named_and_other_stages_are_written_as_a_trace(tmp_path, capsys):
    main(["compile", str(EXAMPLES / "opal" / "three_tiers.json"), "--to", "predict", "-o", str(tmp_path / "t.yaml")])
    main(["compile", str(EXAMPLES / "opal" / "defaults_apc.json"), "--to", "predict", "-o", str(tmp_path / "d.yaml")])
    err = capsys.readouterr().err
    named = YAML(typ="safe", pure=True).load((tmp_path / "t.yaml").read_text())["traffic"]
    assert (tmp_path / named["source"]["paths"][0]).resolve() == (EXAMPLES / "opal/traces/conversation-300.jsonl")
    assert named["source"]["block_size"] == 512 and named["load"]["speedup"] == 0.25  # multiplier_to_sec 0.004
    rows = (tmp_path / "d.trace.jsonl").read_bytes().splitlines()
    assert len(rows) == 115 and "opal.workload.stages: `stages` does not carry over" in err
