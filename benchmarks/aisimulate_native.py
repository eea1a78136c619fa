"""Compile examples with `--to aisimulate-native`, replay them in AISimulate's runtime, compare with its predict.

Not a test (AISimulate is never a dependency): run with kvreplay's Python and point `--aisimulate-python` at
an interpreter that has AISimulate installed.  For each example it

1. writes `kvreplay compile EXAMPLE --to aisimulate-native`,
2. runs `aisimulate predict -c EXAMPLE` in that interpreter, catching the execution spec its predict hands
   `aisimulate._runtime.run_replay_json` and the report that call returns,
3. hands kvreplay's compiled spec to `run_replay_json` and compares the two reports key by key (the keys
   that measure host wall-clock time are left out: they differ from run to run of the same spec),
4. lists the leaves where the two execution specs differ (explaining a difference when there is one).

    python benchmarks/aisimulate_native.py --aisimulate-python /work/venv-aisim/bin/python [EXAMPLE ...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("host-offload-prediction", "g1-default-capacity", "g3-storage", "kimi-k3-state-cache",
            "disaggregated-kimi-state")
WALL_CLOCK = {"wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s"}
# runs inside AISimulate's interpreter: predict with its runtime call caught, then the compiled spec alone
DRIVER = r"""
import json, sys
import aisimulate._runtime as runtime
from aisimulate.main import main
config, compiled, out_dir, result = sys.argv[1:5]
real, caught = runtime.run_replay_json, {}
def catch(spec_json):
    caught["spec"] = json.loads(spec_json)
    caught["report"] = json.loads(real(spec_json))
    return json.dumps(caught["report"])
runtime.run_replay_json = catch
code = main(["predict", "-c", config, "--output-dir", out_dir, "--overwrite", "--format", "json"])
try:
    ours = json.loads(real(open(compiled).read()))
except Exception as error:
    ours = {"error": str(error)}
json.dump({"predict_exit": code, "predict_spec": caught.get("spec"), "predict_report": caught.get("report"),
           "compiled_report": ours}, open(result, "w"))
"""


def leaves(node, path=""):
    if isinstance(node, dict):
        for key in sorted(node):
            yield from leaves(node[key], f"{path}.{key}" if path else key)
    else:
        yield path, node


def compare(example: str, python: str, kvreplay: str, work: Path) -> dict:
    config = ROOT / "examples" / f"{example}.yaml"
    compiled = work / f"{example}.native.json"
    subprocess.run([kvreplay, "compile", str(config), "--to", "aisimulate-native", "-o", str(compiled)], check=True)
    result = work / f"{example}.result.json"
    subprocess.run([python, "-c", DRIVER, str(config), str(compiled), str(work / f"out-{example}"), str(result)],
                   check=True, stdout=subprocess.DEVNULL)
    data = json.loads(result.read_text())
    theirs, ours = data["predict_report"], data["compiled_report"]
    if theirs is None or ours is None:  # (AISimulate's predict failed, e.g. a model config it must download)
        return {"example": example, "failed": "aisimulate predict gave no report"}
    keys = sorted((set(theirs) | set(ours)) - WALL_CLOCK)
    differ = {k: [theirs.get(k), ours.get(k)] for k in keys if theirs.get(k) != ours.get(k)}
    spec_theirs = dict(leaves(data["predict_spec"]))
    spec_ours = dict(leaves(json.loads(compiled.read_text())))
    spec_differ = {k: [spec_theirs.get(k, "(absent)"), spec_ours.get(k, "(absent)")]
                   for k in sorted(set(spec_theirs) | set(spec_ours)) if spec_theirs.get(k, 0.5) != spec_ours.get(k, 0.5)}
    return {"example": example, "report_keys": len(keys), "report_differ": differ, "spec_differ": spec_differ,
            "summary": {k: theirs.get(k) for k in ("completed_requests", "mean_ttft_ms", "mean_tpot_ms",
                                                   "prefix_cache_reused_ratio", "duration_ms")}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", default=EXAMPLES, help="example names (default: five)")
    parser.add_argument("--aisimulate-python", required=True, help="a Python with AISimulate installed")
    parser.add_argument("--kvreplay", default=str(Path(sys.executable).with_name("kvreplay")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for example in args.examples:
            row = compare(example, args.aisimulate_python, args.kvreplay, Path(work))
            if "failed" in row:
                print(f"{example}: not compared: {row['failed']}")
                continue
            same = "identical" if not row["report_differ"] else f"{len(row['report_differ'])} keys differ"
            print(f"{example}: {same} over {row['report_keys']} report keys; summary {json.dumps(row['summary'])}")
            for key, (theirs, ours) in row["report_differ"].items():
                print(f"  report {key}: predict {theirs} / compiled {ours}")
            defaults = [key for key, (_, ours) in row["spec_differ"].items() if ours == "(absent)"]
            for key, (theirs, ours) in row["spec_differ"].items():
                if ours != "(absent)":
                    print(f"  spec {key}: predict {json.dumps(theirs)} / compiled {json.dumps(ours)}")
            if defaults:
                print(f"  spec: {len(defaults)} leaves predict writes are left to the runtime's defaults: "
                      + ", ".join(sorted({k.rsplit('.', 1)[-1] for k in defaults})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
