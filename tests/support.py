"""Test helpers that several test modules share: repository paths, config text, reading a run's outputs, and
hand-built trace scenarios."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.engine import Replay
from kvreplay.runtime.metrics import request_record
from kvreplay.runtime.replay import build
from kvreplay.runtime.requests import Request

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED_TRACES = ROOT.parent / "shared" / "traces"  # the real Mooncake traces live beside the checkout, not in it
TRAFFIC = "traffic: {source: {type: synthetic}, load: {type: concurrency, concurrency: 2}, stop: {requests: 4}}\n"


def compile_yaml(text: str, overrides=()):
    return compile_bytes(text.encode(), "test.yaml", overrides)


def codes(result) -> set[str]:
    return {d.code for d in result.diagnostics}


def read_outputs(out_dir) -> tuple[dict, list[dict]]:
    """(summary, per-request records) of a run with --capture-per-request."""
    out_dir = Path(out_dir)
    prediction = orjson.loads((out_dir / "prediction.json").read_bytes())
    records = [orjson.loads(line) for line in (out_dir / "requests.jsonl").read_bytes().splitlines()]
    return prediction["summary"], records


def output_bytes(out_dir) -> tuple[bytes, bytes]:
    """prediction.json and requests.jsonl of a run as bytes, for byte-identity checks."""
    out_dir = Path(out_dir)
    return (out_dir / "prediction.json").read_bytes(), (out_dir / "requests.jsonl").read_bytes()


def shared_trace(name: str) -> Path:
    """The real Mooncake trace `name` from SHARED_TRACES; fails the test, without a traceback, when it is missing."""
    path = SHARED_TRACES / name
    if not path.is_file():
        pytest.fail(f"missing real trace {path}: the tests expect the shared/ directory (with traces/) beside the "
                    f"repository root {ROOT}", pytrace=False)
    return path


def mooncake_trace_config(trace: Path, *, block_size: int, g1_blocks: int, host_blocks: int = 0) -> str:
    """Predict config replaying a Mooncake trace at its timestamps on one aggregated worker: fixed timing
    (prefill 50 ms, decode 10 ms), a fixed G1 of `g1_blocks` blocks of `block_size` tokens and, if
    `host_blocks`, host offload (G2) of that many blocks."""
    host = f"        host_offload: {{num_host_blocks: {host_blocks}}}\n" if host_blocks else ""
    return f"""engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 50.0, decode_ms: 10.0}}
      kv_cache:
        block_size: {block_size}
        capacity: {{type: fixed, blocks: {g1_blocks}}}
{host}traffic:
  source: {{type: trace, paths: ["{trace.as_posix()}"], format: mooncake, block_size: 512}}
  load: {{type: trace_timestamps}}
"""


# ---- hand-built trace scenarios (tests/test_g2.py, tests/test_pd.py) -----------------------------------------
# A scenario is a few Mooncake rows in trace.jsonl beside a config whose traffic is SCENARIO_TRAFFIC and whose
# engine blocks hold BS tokens: every hash_id is then exactly one engine block, so a test chooses which requests
# share which blocks.

BS = 4  # tokens per engine block and per trace hash_id
MS = 1_000_000  # ns
SCENARIO_TRAFFIC = f"""traffic:
  source: {{type: trace, paths: [trace.jsonl], block_size: {BS}}}
  load: {{type: trace_timestamps}}
"""


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


def replay_both_ways(plan: dict, directory: Path, *, kv_events: bool = False) -> tuple[Replay, Replay, list[dict]]:
    """Replay with macro steps, then single-stepped (capturing KV events if `kv_events`); both must give the same
    per-request records and G2 counters.  Returns (macro-stepped, single-stepped, records)."""
    fused = build(plan, directory)
    fused.run()
    single = build(plan, directory, single_step=True)
    if kv_events:
        single.capture_kv_events()
    single.run()
    records = [request_record(r) for r in single.requests]
    assert [request_record(r) for r in fused.requests] == records, "macro steps changed the records"
    assert domain_summaries(fused) == domain_summaries(single), "macro steps changed the G2 counters"
    return fused, single, records


def domain_summaries(replay: Replay) -> list[dict]:
    """What prediction.json reports as `summary.g2_domains` (see kvreplay/predict.py)."""
    return [{"name": pool.name, **pool.summary()} for pool in replay.host_pools()]


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
