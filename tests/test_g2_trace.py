"""G2 on the real synthetic trace: host offload raises first-admission reuse, and G1 + host add up exactly."""
from __future__ import annotations

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.examples.trace_config import mooncake_trace_config

from .golden import golden_extension
from .support import ROOT, read_outputs, shared_trace


def run(tmp_path, name: str, host_blocks: int) -> tuple[dict, list[dict]]:
    trace = shared_trace("synthetic_trace.jsonl")
    config = tmp_path / f"{name}.yaml"
    config.write_text(mooncake_trace_config(trace, block_size=512, g1_blocks=1000, host_blocks=host_blocks))
    out = tmp_path / name
    assert main(["predict", "-c", str(config), "--output-dir", str(out), "--capture-per-request",
                 "--no-progress"]) == 0
    return read_outputs(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("g2trace")
    return run(tmp, "g1", 0), run(tmp, "g2", 4000)


def test_host_offload_raises_first_admission_reuse(runs):
    (g1, _), (g2, _) = runs
    assert g1["first_admission_host_reused_tokens"] == 0
    # AISimulate on the same configs: 0.1104 and 0.2882 (facts §12, §21)
    assert round(g1["first_admission_prefix_cache_reused_ratio"], 4) == 0.1104
    assert round(g2["first_admission_prefix_cache_reused_ratio"], 4) == 0.2888
    assert g2["first_admission_prefix_cache_reused_ratio"] > g1["first_admission_prefix_cache_reused_ratio"] + 0.15


def test_g1_and_host_reuse_add_up_exactly(runs):
    _, (g2, records) = runs
    admitted = [r for r in records if r["admission_count"]]
    assert len(admitted) == g2["completed_requests"] < len(records)  # the prompts past the context never ran
    for record in admitted:
        assert record["first_admission_g1_reused_input_tokens"] + record["first_admission_host_reused_input_tokens"] \
            == record["first_admission_reused_input_tokens"]
    total = sum(r["first_admission_reused_input_tokens"] for r in admitted)
    assert g2["first_admission_g1_reused_tokens"] + g2["first_admission_host_reused_tokens"] == total
    assert total == round(g2["first_admission_prefix_cache_reused_ratio"] * g2["total_input_tokens"])
    domain, = g2["g2_domains"]
    assert domain["restores"] * 512 == g2["first_admission_host_reused_tokens"] + \
        sum(a["host_reused_input_tokens"] for r in records for a in r["admission_history"][1:])


def test_the_g2_summary_is_golden(runs, snapshot):
    _, (g2, _) = runs
    assert g2 == snapshot.use_extension(golden_extension("replays"))(name="synthetic-trace-g2.summary")


SPEC_EXAMPLE = ROOT / "examples" / "host-offload-prediction.yaml"
COMBINATIONS = [("offloading_v0_24", "dp_rank_local"), ("offloading_v0_24", "cluster_shared"),
                ("offloading_v0_32", "dp_rank_local"), ("simple_cpu_v0_32", "dp_rank_local")]


@pytest.mark.parametrize("connector, scope", COMBINATIONS)
@pytest.mark.parametrize("g1_blocks", [2499, 400])  # the spec's G1, and one small enough that G2 is read
def test_the_spec_example_with_each_connector_and_scope_is_golden(connector, scope, g1_blocks, tmp_path, snapshot):
    out = tmp_path / "out"
    sets = [f"engine.workers.aggregated.kv_cache.host_offload.connector={connector}",
            f"engine.workers.aggregated.kv_cache.host_offload.scope={scope}",
            f"engine.workers.aggregated.kv_cache.capacity.blocks={g1_blocks}"]
    argv = ["predict", "-c", str(SPEC_EXAMPLE), "--output-dir", str(out), "--no-progress"]
    assert main(argv + [a for s in sets for a in ("--set", s)]) == 0
    summary = orjson.loads((out / "prediction.json").read_bytes())
    if g1_blocks == 400:
        assert summary["first_admission_host_reused_tokens"] > 0
    name = f"host-offload-{connector}-{scope}-g1-{g1_blocks}.summary"
    assert summary == snapshot.use_extension(golden_extension("replays"))(name=name)
