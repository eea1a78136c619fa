"""`--to dynamo-mocker`: Dynamo's mocker engine arguments, a Mooncake trace and the replay command."""
from __future__ import annotations

import orjson
import pytest

from kvreplay.cli import main
from kvreplay.compiler.pipeline import compile_file

from .golden import golden_extension
from .support import EXAMPLES

GOLDEN = ("g1-default-capacity", "host-offload-prediction", "kvcr-kv-aware-trace", "mooncake-trace", "trtllm-fixed-timing")


def to_mocker(name: str, out, capsys) -> tuple[dict, list[dict], str, list[str]]:
    assert main(["compile", str(EXAMPLES / f"{name}.yaml"), "--to", "dynamo-mocker", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    rows = [orjson.loads(line) for line in out.with_suffix(".jsonl").read_bytes().splitlines()]
    dropped = [line.split(": ", 1)[1] for line in err.splitlines() if "TARGET-DROPPED" in line]
    return orjson.loads(out.read_bytes()), rows, out.with_suffix(".sh").read_text(), dropped


@pytest.mark.parametrize("name", GOLDEN)
def test_mocker_outputs_are_golden(name, tmp_path, snapshot, capsys):
    args, rows, command, dropped = to_mocker(name, tmp_path / "m.json", capsys)
    golden = snapshot.use_extension(golden_extension("targets/dynamo-mocker"))(name=name)
    assert {"engine_args": args, "trace_rows": len(rows), "first_rows": rows[:2], "command": command,
            "dropped": dropped} == golden


def test_the_mocker_gets_the_same_cache_and_the_same_requests(tmp_path, capsys):
    args, rows, command, dropped = to_mocker("kvcr-kv-aware-trace", tmp_path / "m.json", capsys)
    plan = compile_file(EXAMPLES / "kvcr-kv-aware-trace.yaml").plan.to_dict()
    role = plan["engine"]["workers"]["aggregated"]
    assert args["num_gpu_blocks"] == plan["geometry"]["aggregated"]["g1_blocks"] == 4000
    assert (args["block_size"], args["max_num_seqs"], args["max_num_batched_tokens"]) == (
        role["kv_cache"]["block_size"], role["scheduler"]["max_sequences"], role["scheduler"]["max_batched_tokens"])
    # a Mooncake source keeps its own ids and 512-token block; KV-aware placement is Dynamo's KV router
    assert "--trace-block-size 512" in command and "--router-mode kv_router --num-workers 2" in command
    source = [orjson.loads(line) for line in (EXAMPLES / "traces" / "conversation-200.jsonl").read_bytes().splitlines()]
    assert [r["hash_ids"] for r in rows] == [r["hash_ids"] for r in source[:len(rows)]]
    assert any("`kvcr` does not carry over to Dynamo's mocker: the mocker has no peer fetch" in d for d in dropped)


def test_synthetic_prompts_are_numbered_by_prefix_one_id_per_block(tmp_path, capsys):
    _, rows, command, _ = to_mocker("host-offload-prediction", tmp_path / "m.json", capsys)
    assert "--trace-block-size 16" in command
    assert all(len(r["hash_ids"]) == -(-r["input_length"] // 16) for r in rows)
    first = [r for r in rows if r["timestamp"] == 0.0]
    later = {tuple(r["hash_ids"][:64]) for r in rows}
    # four sessions start at once (concurrency 4); the 64 rows are 16 sessions' turns, each turn starting with
    # its session's first 1,024-token prompt (64 blocks), so 16 distinct first-prompt prefixes
    assert len(first) == 4 and len({tuple(r["hash_ids"][:64]) for r in first}) == 4
    assert len(rows) == 64 and len(later) == 16
