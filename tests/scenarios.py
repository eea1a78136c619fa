"""Hand-built trace scenarios: a few Mooncake rows in trace.jsonl beside a config whose traffic is
SCENARIO_TRAFFIC and whose engine blocks hold BS tokens, so that every hash_id is exactly one engine block and a
test chooses which requests share which blocks.  Each scenario is replayed with macro steps and single-stepped;
both must agree."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.shell.replay import Replay
from kvreplay.runtime.outputs.metrics import request_record
from kvreplay.runtime.outputs.sections import summary_sections
from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.runtime.build import build
from kvreplay.runtime.serving.requests import Request

BS = 4  # tokens per engine block and per trace hash_id
MS = 1_000_000  # ns
SCENARIO_TRAFFIC = f"""traffic:
  source: {{type: trace, paths: [trace.jsonl], block_size: {BS}}}
  load: {{type: trace_timestamps}}
"""


def aggregated_config(tiers: dict, *, g1_blocks: int = 4, bytes_per_token: int | str = 250_000, parallelism: str = "",
                      role_extra: str = "", budget: int = 64, max_sequences: int = 4, traffic_extra: str = "") -> str:
    """One aggregated role on Qwen3-8B / H200 with fixed timing (a pass with prefill 10 ms, decode only 1 ms), a
    fixed G1 of `g1_blocks` blocks of BS tokens, and `tiers` (`host_offload`, `g3_offload`, ...: mappings) in its
    kv_cache; `role_extra` and `traffic_extra` are YAML lines added to the role and to the traffic."""
    tier_lines = "".join(f"        {name}: {json.dumps(value)}\n" for name, value in tiers.items())
    return f"""
engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      parallelism: {{{parallelism}}}{role_extra}
      timing: {{type: fixed, prefill_ms: 10, decode_ms: 1}}
      scheduler: {{max_batched_tokens: {budget}, max_sequences: {max_sequences}}}
      kv_cache:
        block_size: {BS}
        bytes_per_token: {bytes_per_token}
        capacity: {{type: fixed, blocks: {g1_blocks}}}
{tier_lines}{SCENARIO_TRAFFIC}{traffic_extra}"""


def row(t: float, prompt: int, output: int, ids: list[int]) -> dict:
    """One Mooncake row: arrives at `t` ms, `prompt` tokens whose blocks are `ids` (one id per 4 tokens)."""
    assert len(ids) == -(-prompt // BS)
    return {"timestamp": t, "input_length": prompt, "output_length": output, "hash_ids": ids}


def write_trace(directory: Path, rows: list[dict]) -> None:
    (directory / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def compile_scenario(directory: Path, rows: list[dict], config: str, name: str) -> dict:
    """The plan of the config text `config` (reported as `name`), with `rows` written as its trace."""
    write_trace(directory, rows)
    result = compile_bytes(config.encode(), str(directory / name), ())
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan.to_dict()


def predict_scenario(directory: Path, rows: list[dict], config: str, name: str, *flags: str) -> Path:
    """`kvreplay predict --format json` on the config text `config` (written as `name`) with `rows` as its trace;
    returns the output folder."""
    write_trace(directory, rows)
    path = directory / name
    path.write_text(config)
    out = directory / "out"
    code = main(["predict", "--no-progress", "-c", str(path), "--output-dir", str(out), "--format", "json", *flags])
    assert code == 0
    return out


def replay_both_ways(plan: dict, directory: Path, *, kv_events: bool = False,
                     prepare=None) -> tuple[Replay, Replay, list[dict]]:
    """Replay with macro steps, then single-stepped (capturing KV events if `kv_events`); both must give the same
    per-request records, tier counters and end time.  Returns (macro-stepped, single-stepped, records)."""
    fused = build(finish_plan(plan, directory))
    single = build(finish_plan(plan, directory), single_step=True)
    if kv_events:
        single.capture_kv_events()
    for replay in (fused, single):
        if prepare is not None:  # a test may set up state no traffic reaches
            prepare(replay)
        replay.run()
    records = [request_record(r) for r in single.requests]
    assert [request_record(r) for r in fused.requests] == records, "macro steps changed the records"
    assert summary_sections(fused) == summary_sections(single), "macro steps changed the tier counters"
    assert fused.now == single.now, "macro steps changed when the last event happened"
    return fused, single, records


def domain_summaries(replay: Replay) -> list[dict]:
    """What prediction.json reports as `summary.g2_domains`."""
    return summary_sections(replay).get("g2_domains", [])


def token_times(request: Request) -> list[float]:
    """Every token time (ms) of a request."""
    times = [request.first_token_ns / MS]
    for gap, count in request.gaps:
        times += [times[-1] + gap / MS * (i + 1) for i in range(count)]
    return times


@dataclass
class ScenarioRun:
    """A replayed scenario; `run[i]` is the per-request record of request i."""
    replay: Replay
    records: list[dict]

    def __getitem__(self, index: int) -> dict:
        return self.records[index]

    @property
    def sections(self) -> dict:
        """The summary's tier sections (`g2_domains`, `g3_offload`, `kvcr`)."""
        return summary_sections(self.replay)

    def admissions(self, index: int) -> list[tuple]:
        """(at ms, pool, g1 tokens, host tokens) of every admission of request `index`."""
        return [(a["at_ms"], a["pool"], a["g1_reused_input_tokens"], a["host_reused_input_tokens"])
                for a in self.records[index]["admission_history"]]

    def ttft(self, index: int) -> float:
        return self.records[index]["ttft_ms"]
