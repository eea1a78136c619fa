"""The opal front-end: detection, its schema, the OPAL-* rules through `kvreplay validate`, lowering, explain, the plan.

Valid inputs are the shipped configs in examples/opal/; each rule's negative file is
golden/specs/negative/OPAL-*.json (its JSON report is pinned by tests/test_negative_corpus.py).
"""
from __future__ import annotations

import json

import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_bytes, compile_file
from kvreplay.compiler.rules import all_rules

from .support import EXAMPLES, ROOT, compile_yaml

OPAL = EXAMPLES / "opal"
NEGATIVE = ROOT / "golden" / "specs" / "negative"
SHIPPED_APC = ROOT / "tests" / "data" / "opal" / "defaults_apc.shipped.json"
OPAL_RULES = sorted(r.id for r in all_rules() if r.id.startswith("OPAL-"))


def run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out + err


def opal_config(tmp_path, change=lambda doc: None, base: str = "defaults.json", name: str = "config.json"):
    """examples/opal/<base> in tmp_path (the model folder named absolutely), after `change(document)`."""
    doc = json.loads((OPAL / base).read_text())
    doc["model"]["model_params"]["config_dir"] = str(OPAL / "model-configs")
    for stage in doc["workload"]["stages"]:
        if "trace_file" in stage["workload_params"]:
            stage["workload_params"]["trace_file"] = str(OPAL / stage["workload_params"]["trace_file"])
    change(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def position(path, text: str, nth: int = 0) -> tuple[int, int]:
    """(line, column) of the `nth` occurrence of `text` in the file."""
    lines = path.read_text().splitlines()
    hits = [(i + 1, line.index(text) + 1) for i, line in enumerate(lines) if text in line]
    return hits[nth]


def test_the_shipped_configs_are_valid(capsys):
    code, out = run(capsys, "validate", OPAL / "defaults.json", OPAL / "defaults_apc.json")
    assert code == 0 and "2 files valid" in out


@pytest.mark.parametrize("rule", OPAL_RULES)
def test_each_validation_case_exits_1_located_with_its_rule_id(capsys, rule):
    path = NEGATIVE / f"{rule}.json"
    code, out = run(capsys, "validate", path)
    assert code == 1 and "Traceback" not in out
    result = compile_file(path)
    assert {d.code for d in result.diagnostics} == {rule}
    for d in result.diagnostics:
        assert f"{path}:{d.span.line}:{d.span.col}: error[{rule}]" in out
        assert d.hint and "hint: " in out


def test_rule_positions_are_the_offending_values(capsys):
    path = NEGATIVE / "OPAL-NOT-POSITIVE.json"
    (first, second) = compile_file(path).diagnostics
    line, col = position(path, '"bandwidth_GBps": 0')
    assert (first.span.line, first.span.col) == (line, col + len('"bandwidth_GBps": '))
    assert (second.pointer, second.message) == ("/kvc/CPUMemory/concurrency", "`concurrency` must be greater than 0")


def test_the_too_small_gpu_names_the_smallest_memory_that_works():
    (d,) = compile_file(NEGATIVE / "OPAL-GPU-TOO-SMALL.json").diagnostics
    assert "holds 8102 blocks, fewer than the 8192" in d.message and "at least 35.3" in d.hint


def test_a_missing_model_config_names_the_paths_tried():
    (d,) = compile_file(NEGATIVE / "OPAL-MODEL-CONFIG.json").diagnostics
    assert "no-such-folder/granite-3.3-8b-instruct/config.json" in d.message and "tried" in d.message


def test_raw_otel_spans_need_a_tokenizer(capsys, monkeypatch):
    """The shipped defaults_apc.json names the raw spans; its model is found from the working directory."""
    monkeypatch.chdir(OPAL)
    code, out = run(capsys, "validate", SHIPPED_APC)
    assert code == 1 and "Traceback" not in out
    line, col = position(SHIPPED_APC, '"pretokenized": false')
    col += len('"pretokenized": ')
    assert f"{SHIPPED_APC}:{line}:{col}: error[OPAL-OTEL-TOKENIZER]" in out
    assert "need a tokenizer, and none is available offline" in out and "pretokenized: true" in out


def test_all_errors_at_once_sorted(tmp_path):
    def change(doc):
        doc["worker"]["vllm_params"].update(apc_lru_ttl=-2, hbm_eviction_threshold=0)
        doc["router"]["router_params"]["policy"] = "Fastest"
        doc["kvc"]["kvc_tiers"] = ["CPUMemory", "Tape"]
    result = compile_file(opal_config(tmp_path, change))
    assert [d.code for d in result.diagnostics] == ["OPAL-ROUTING-POLICY", "OPAL-TTL", "OPAL-THRESHOLD",
                                                    "OPAL-KVC-TIER"]
    assert [d.span.line for d in result.diagnostics] == sorted(d.span.line for d in result.diagnostics)


def test_unknown_keys_get_did_you_mean_at_their_position(tmp_path, capsys):
    path = opal_config(tmp_path, lambda doc: doc["worker"]["vllm_params"].update(blok_size=32))
    code, out = run(capsys, "validate", path)
    line, col = position(path, '"blok_size"')
    assert code == 1 and f"{path}:{line}:{col}: error[SCHEMA-UNKNOWN-KEY]" in out
    assert "did you mean `block_size`?" in out


def test_unknown_sections_and_tier_sections_get_did_you_mean(tmp_path):
    def change(doc):
        doc["simulaton"] = doc.pop("simulation")
        doc["kvc"]["CPUMemroy"] = doc["kvc"].pop("LocalNVMe")
    hints = {d.pointer: d.hint for d in compile_file(opal_config(tmp_path, change)).diagnostics}
    assert hints == {"/simulaton": "did you mean `simulation`?", "/kvc/CPUMemroy": "did you mean `CPUMemory`?"}


def test_huge_numbers_are_out_of_range(tmp_path):
    result = compile_file(opal_config(tmp_path, lambda doc: doc["worker"]["hw"].update(memory_gb=1e30)))
    assert [(d.code, d.pointer) for d in result.diagnostics] == [("SCHEMA-RANGE", "/worker/hw/memory_gb")]


def test_only_the_roofline_step_model(tmp_path):
    result = compile_file(opal_config(tmp_path, lambda doc: doc["worker"]["inference_params"].update(model="linear")))
    assert [d.code for d in result.diagnostics] == ["OPAL-INFERENCE-MODEL"]


@pytest.mark.parametrize("written, policy", [("RoundRobin", "round_robin"), ("leastloaded", "least_loaded"),
                                             ("RANDOM", "random"), ("max_prefix", "max_prefix")])
def test_policy_names_are_case_insensitive(tmp_path, written, policy):
    path = opal_config(tmp_path, lambda doc: doc["router"]["router_params"].update(policy=written))
    assert compile_file(path).plan.records.opal.router.policy == policy


def test_predict_yaml_rejects_the_lowered_only_opal_section():
    result = compile_yaml("engine: {model: Qwen/Qwen3-8B, hardware: h100_sxm}\nopal: {}\n")
    assert [(d.code, d.pointer) for d in result.diagnostics] == [("SCHEMA-UNKNOWN-KEY", "/opal")]


def test_the_lowered_spec_is_one_aggregated_vllm_role(tmp_path):
    def change(doc):
        doc["simulation"]["num_workers"] = 3
        doc["worker"]["hw"]["tp"] = 2
        doc["worker"]["vllm_params"].update(enable_gpu_apc=True, max_num_seqs=64, max_num_batched_tokens=4096,
                                            chunked_prefill=False)
    result = compile_file(opal_config(tmp_path, change))
    engine = result.plan.to_dict()["engine"]
    role = engine["workers"]["aggregated"]
    assert (engine["backend"], engine["mode"], engine["enable_chunked_prefill"]) == ("vllm", "aggregated", False)
    assert (role["parallelism"]["replicas"], role["parallelism"]["tensor"]) == (3, 2)
    assert role["scheduler"]["max_batched_tokens"] == 4096 and role["scheduler"]["max_sequences"] == 64
    assert role["kv_cache"]["prefix_caching"] is True and role["kv_cache"]["capacity"]["type"] == "fixed"
    assert role["kv_cache"]["capacity"]["blocks"] == (2 * 80 * 2 ** 30 - 16_341_721_088) // (16 * 163_840)
    assert role["kv_cache"]["bytes_per_token"] == 163_840 // 2  # 4 of the 8 KV heads on each of 2 ranks
    (plan_role,) = result.plan.records.roles
    assert plan_role.timing.peak_flops == 989.5e12 and plan_role.timing.memory_bandwidth_gbps == 3300.0
    assert plan_role.timing.tensor == 2 and plan_role.replica_steps == ((0, 3),)


def test_gpu_memory_utilization_does_not_enter_the_pool(tmp_path, capsys):
    blocks = {u: compile_file(opal_config(tmp_path, lambda doc: doc["worker"]["vllm_params"].update(
        gpu_memory_utilization=u), name=f"{u}.json")).plan.records.roles[0].g1_blocks for u in (0.5, 0.9, 1.0)}
    assert set(blocks.values()) == {26_534}
    code, out = run(capsys, "explain", OPAL / "defaults_apc.json")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert "not used: total_gpu_blocks leaves gpu_memory_utilization out" in \
        rows["opal.worker.vllm_params.gpu_memory_utilization"]
    assert "gpu_memory_utilization does not enter it" in rows["engine.workers.aggregated.kv_cache.capacity.blocks"]
    assert "26534" in rows["engine.workers.aggregated.kv_cache.capacity.blocks"]


def test_explain_shows_every_opal_knob_with_its_provenance(capsys):
    code, out = run(capsys, "explain", "--format", "json", OPAL / "defaults.json")
    rows = {row["path"]: row for row in json.loads(out)}
    assert rows["opal.worker.vllm_params.block_size"]["provenance"] == "user"
    assert rows["opal.worker.vllm_params.apc_lru_ttl"]["provenance"] == \
        "default(opal: worker.vllm_params.apc_lru_ttl = 0)"
    assert rows["opal.worker.vllm_params.lookahead_reqs"]["value"] == 256
    assert rows["engine.workers.aggregated.kv_cache.block_size"]["provenance"] == \
        "user(opal: worker.vllm_params.block_size)"
    assert rows["engine.workers.aggregated.kv_cache.prefix_caching"]["provenance"] == \
        "default(opal: worker.vllm_params.enable_gpu_apc = false)"
    assert rows["opal.derived.params"]["value"] == 8_170_860_544
    assert rows["opal.kvc.CPUMemory.eviction_policy"]["value"] == "none"
    assert rows["opal.worker.inference_params.a"]["value"] == "4"  # opal's strings are accepted as written


def test_the_opal_plan_records(tmp_path):
    def change(doc):
        doc["simulation"]["simulation_time"] = 120.5
        doc["worker"]["vllm_params"].update(enable_gpu_apc=True, apc_lru_ttl=2.5, hbm_eviction_threshold=0.8,
                                            apc_eviction_check_interval_sec=0.25)
        doc["kvc"]["kvc_tiers"] = ["LocalNVMe", "DistributedFS"]
        doc["kvc"]["DistributedFS"]["eviction_policy"] = "lru"
        doc["router"]["router_params"].update(enable_scaling=True, max_workers=4, scale_latency=1.5)
    records = compile_file(opal_config(tmp_path, change)).plan.records
    opal = records.opal
    assert records.traffic.kind == "opal-stages" and records.traffic.load == "stages"
    assert records.traffic.stop_ns == opal.simulation_time_ns == 120_500_000_000 and records.traffic.seed == 42
    assert (opal.apc.ttl_ns, opal.apc.eviction_threshold, opal.apc.check_interval_ns) == (2_500_000_000, 0.8, 250_000_000)
    nvme, dfs = opal.kvc.tiers
    chunk_bytes = 256 * 163_840
    assert (nvme.name, nvme.shared, nvme.chunks, nvme.eviction) == ("LocalNVMe", False, 1024 * 2 ** 30 // chunk_bytes,
                                                                     "none")
    assert (dfs.shared, dfs.chunks, dfs.eviction) == (True, 1_048_576 * 2 ** 30 // chunk_bytes, "lru")
    assert (nvme.link.bandwidth_gbps, nvme.link.latency_ns, nvme.link.slots) == (10.0, 10_000, 1000)
    assert opal.kvc.gpu_link == records.opal.kvc.gpu_link.__class__(50.0, None, 200, 1_000_000)  # CPUMemory's, unlisted
    assert (opal.router.scaling, opal.router.max_workers, opal.router.scale_latency_ns) == (True, 4, 1_500_000_000)
    assert opal.router.check_interval_ns == 1_000_000_000
    assert (opal.model_name, opal.memory_gb, opal.tp, opal.model_bytes) == ("granite-3.3-8b-instruct", 80.0, 1,
                                                                            16_341_721_088)
    assert json.loads(opal.config_json)["simulation"]["simulation_time"] == 120.5


def test_without_a_cpu_memory_section_tier_copies_use_the_first_tier(tmp_path):
    def change(doc):
        del doc["kvc"]["CPUMemory"]
        doc["kvc"]["kvc_tiers"] = ["DistributedFS"]
    opal = compile_file(opal_config(tmp_path, change)).plan.records.opal
    assert opal.kvc.gpu_link == opal.kvc.tiers[0].link and opal.kvc.gpu_link.bandwidth_gbps == 100.0


def test_no_tiers_no_gpu_link(tmp_path):
    opal = compile_file(opal_config(tmp_path, lambda doc: doc["kvc"].update(kvc_tiers=[]))).plan.records.opal
    assert opal.kvc.tiers == () and opal.kvc.gpu_link is None


def test_config_json_is_the_config_as_loaded_indent_4():
    document = json.loads((OPAL / "defaults.json").read_text())
    opal = compile_file(OPAL / "defaults.json").plan.records.opal
    assert opal.config_json == json.dumps(document, indent=4)


def test_set_overrides_take_opal_paths_and_units():
    result = compile_file(OPAL / "defaults.json", ["worker.hw.memory_gb=36GiB"])
    assert result.ok and result.plan.records.roles[0].g1_blocks == 8_511


def test_bytes_in_place_of_a_file_are_read_as_opal():
    text = (OPAL / "defaults.json").read_bytes()
    result = compile_bytes(text, str(OPAL / "copy.json"))
    assert result.ok and result.spec.frontend == "opal"


