"""`kvreplay compile --to aisimulate-native`: the execution spec AISimulate's runtime takes, and what it drops.

(That the compiled specs replay in AISimulate to the report its predict gets is measured by
benchmarks/aisimulate_native.py, recorded in docs/reference-facts.md section 10: AISimulate is no dependency.)
"""
from __future__ import annotations

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file
from kvreplay.targets import compile_to

from .golden import golden_extension
from .support import EXAMPLES, ROOT

SYNTHETIC = ("deepseek-v4-flash-state-cache", "disaggregated-kimi-state", "disaggregated-pd", "g1-default-capacity",
             "g2-cluster-shared", "g3-storage", "host-offload-prediction", "kimi-k3-state-cache", "kvcr-peer-fetch",
             "scaled-workers", "sglang-default-capacity", "state-cache-fixed-bytes", "trtllm-fixed-timing")


def compiled(name: str, target: str = "aisimulate-native", overrides=()):
    """(the target's main document, [(dotted field, message)] of what did not carry over)."""
    result = compile_file(EXAMPLES / f"{name}.yaml", overrides)
    files, carry = compile_to(result, target, None)
    dropped = [(d.dotted, d.message) for d in carry.diagnostics()]
    return orjson.loads(files[None]), dropped


@pytest.mark.parametrize("name", SYNTHETIC)
def test_every_synthetic_example_compiles_to_a_golden_execution_spec(name, snapshot):
    spec, dropped = compiled(name)
    golden = snapshot.use_extension(golden_extension("targets/aisimulate-native"))(name=name)
    assert {"execution_spec": spec, "dropped": dropped} == golden


REPLAYSPECS = ("aggregated-belady", "aggregated-lengths", "disaggregated")


@pytest.mark.parametrize("name", REPLAYSPECS)
def test_native_replayspecs_compile_to_golden_execution_specs(name, snapshot):
    result = compile_file(ROOT / "golden" / "specs" / "replayspec" / f"{name}.json")
    files, carry = compile_to(result, "aisimulate-native", None)
    dropped = [(d.dotted, d.message) for d in carry.diagnostics()]
    golden = snapshot.use_extension(golden_extension("targets/aisimulate-native"))(name=f"replayspec-{name}")
    assert {"execution_spec": orjson.loads(files[None]), "dropped": dropped} == golden


def test_a_replayspec_keeps_its_requests_and_belady_travels_as_the_engine_policy():
    result = compile_file(ROOT / "golden" / "specs" / "replayspec" / "aggregated-belady.json")
    files, _ = compile_to(result, "aisimulate-native", None)
    spec = orjson.loads(files[None])["spec"]
    assert spec["engine"]["kv_eviction_policy"] == "belady" and spec["max_sim_time_ms"] == 60000.0
    assert [r["id"] for r in spec["requests"]] == ["a-0", "b-0", "a-1"]
    assert spec["requests"][2]["input_token_ids"] == [1, 2, 3, 4, 5, 6, 7, 8, 21, 22, 23, 24]
    result = compile_file(ROOT / "golden" / "specs" / "replayspec" / "aggregated-lengths.json")
    files, carry = compile_to(result, "aisimulate-native", None)
    assert [d.dotted for d in carry.diagnostics()] == ["traffic.source.requests[1].kv_hints"]
    assert all("kv_hints" not in r for r in orjson.loads(files[None])["spec"]["requests"])


def test_the_host_offload_example_as_aisimulate_predict_hands_it_to_its_runtime():
    spec, dropped = compiled("host-offload-prediction")
    rank = spec["spec"]["engine"]["rank"]
    assert dropped == []
    assert (rank["num_gpu_blocks"], rank["block_size"], rank["max_num_seqs"], rank["max_model_len"]) == (2499, 16, 16, 8192)
    # G2 blocks use the checkpoint's storage dtype (BF16), not G1's FP8: 262,144 B/token, as AISimulate has it
    assert rank["kv_cache_bytes_per_token"] == 262144
    assert rank["native_host_offload"] == {"d2h_bandwidth_gbps": 32.0, "h2d_bandwidth_gbps": 32.0, "num_host_blocks": 4096}
    assert rank["timing_model"]["config"]["backend_version"] == "0.24.0"
    assert spec["traffic"] == {"source_type": "synthetic-session", "isl": 1024, "osl": 128, "turns_per_session": 4,
                               "inter_turn_delay_ms": 0.0, "num_prefix_groups": 0, "shared_prefix_ratio": 0.0,
                               "load_type": "concurrency", "concurrency": 4, "request_count": 16,
                               "trace_block_size": 512}
    assert spec["spec"]["max_in_flight"] == 4 and spec["spec"]["requests"] == []


def test_moe_widths_travel_only_when_the_user_gave_them():
    kimi, _ = compiled("kimi-k3-state-cache")
    config = kimi["spec"]["engine"]["rank"]["timing_model"]["config"]
    assert (config["tp"], config["moe_tp_size"], config["moe_ep_size"]) == (8, 1, 8)
    qwen, _ = compiled("g1-default-capacity")
    assert "moe_ep_size" not in qwen["spec"]["engine"]["rank"]["timing_model"]["config"]



def test_the_overlap_scheduler_travels_as_the_native_sglang_host_loop():
    """`host_loop: true` is the native `rank.sglang.host_loop` (AISimulate's runtime then replays the same report as
    its predict: benchmarks/aisimulate_native.py, facts section 34); without it the rank has no `sglang` entry."""
    spec, dropped = compiled("sglang-default-capacity", overrides=("engine.workers.aggregated.host_loop=true",))
    assert spec["spec"]["engine"]["rank"]["sglang"] == {"host_loop": True}
    assert not [field for field, _ in dropped if "host_loop" in field]
    plain, _ = compiled("sglang-default-capacity")
    assert "sglang" not in plain["spec"]["engine"]["rank"]

def test_what_does_not_carry_over_is_listed_with_its_reason():
    _, dropped = compiled("scaled-workers")
    assert [field for field, _ in dropped] == ["engine.hardware", "engine.model", "engine.workers.aggregated.scaling"]
    assert "scaled workers are a kvreplay extension" in dropped[2][1]
    _, dropped = compiled("kvcr-peer-fetch")
    assert dropped == [("engine.workers.aggregated.kv_cache.kvcr", "`kvcr` does not carry over to AISimulate's native "
                        "execution spec: KVCR peer fetch is a kvreplay extension")]
    _, dropped = compiled("kvcr-peer-fetch", overrides=["engine.placement=kv_aware"])
    assert dropped[0] == ("engine.placement", "`placement` does not carry over to AISimulate's native execution "
                          "spec: `kv_aware` placement is a kvreplay extension; round robin is used")


def test_a_user_field_no_target_reads_is_reported_too():
    """The ledger lists what the user wrote and the target never read, without the target naming it."""
    result = compile_file(EXAMPLES / "host-offload-prediction.yaml")
    _, carry = compile_to(result, "aisimulate-native", None)
    assert carry.diagnostics() == ()
    carry.carried.discard("/traffic/stop")  # as if the target had not read the stop condition
    assert [(d.dotted, d.severity, d.message) for d in carry.diagnostics(strict=True)] == [
        ("traffic.stop.sessions", "error", "`sessions` does not carry over to AISimulate's native execution spec: "
         "AISimulate's native execution spec has no field for it")]


def test_the_cli_warns_and_writes_or_with_strict_fails_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "native.json"
    config = str(EXAMPLES / "g2-cluster-shared.yaml")
    assert main(["compile", config, "--to", "aisimulate-native", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "g2-cluster-shared.yaml:15:38: warning[TARGET-DROPPED] engine.workers.aggregated.kv_cache.host_offload." \
           "shared_d2h_bandwidth_gbps: `shared_d2h_bandwidth_gbps` does not carry over" in err
    assert err.endswith("2 warnings: fields that do not carry over to AISimulate's native execution spec\n")
    assert orjson.loads(out.read_bytes())["spec"]["engine"]["dp_size"] == 2
    out.unlink()
    assert main(["compile", config, "--to", "aisimulate-native", "-o", str(out), "--strict"]) == 1
    err = capsys.readouterr().err
    assert "error[TARGET-DROPPED]" in err and err.endswith("2 errors: fields that do not carry over to AISimulate's "
                                                          "native execution spec\n")
    assert not out.exists()
    assert main(["compile", str(EXAMPLES / "host-offload-prediction.yaml"), "--to", "aisimulate-native",
                 "--strict"]) == 0
    assert orjson.loads(capsys.readouterr().out)["spec"]["engine"]["rank"]["num_gpu_blocks"] == 2499


def test_a_trace_travels_as_explicit_requests(capsys):
    spec, _ = compiled("mooncake-trace", overrides=["traffic.stop.max_virtual_time_seconds=3"])
    requests = spec["spec"]["requests"]
    assert "traffic" not in spec and spec["spec"]["max_sim_time_ms"] == 3000.0
    assert [r["arrival_time_ms"] for r in requests[:3]] == [0.0, 0.0, 0.0]
    assert all(len(r["input_token_ids"]) == r["input_tokens"] for r in requests) and len(requests) > 5


def test_configs_of_other_front_ends_are_refused(capsys):
    assert main(["compile", str(EXAMPLES / "opal" / "defaults.json"), "--to", "aisimulate-native"]) == 2
    assert "is an opal config; --to aisimulate-native reads predict configs or replayspec configs" in \
        capsys.readouterr().err


def test_strict_is_refused_where_nothing_can_be_dropped(capsys):
    assert main(["compile", str(EXAMPLES / "g1-default-capacity.yaml"), "--strict"]) == 2
    assert "--strict applies to --to another tool's format, not --to plan" in capsys.readouterr().err
