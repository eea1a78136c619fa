"""Benchmark: kvreplay and AISimulate side by side on a folder of predict configs, one table row per config.

Each config (`*.yaml`, default `docs/reference-runs/fidelity/`) is given to both
tools as the same file: `predict --format json --capture-per-request`.  A trace
path in it is taken relative to the config, and a gzipped trace (the vendored
ones of tests/data/traces) is unpacked once, because AISimulate reads only plain
JSONL; both tools then read the rewritten copy.  AISimulate is an executable
installed outside this repository (`--aisimulate PATH`), never a dependency.

Printed per config: completed requests, prefix reuse ratio, duration, mean TTFT,
mean TPOT and readmissions (the sum of the per-request `readmission_count`,
which both tools write) of each tool, and whether the pair is within issue 13's
tolerances: |delta reuse| <= 0.005, duration within 1 %, mean TTFT within 10 %.
`--markdown` prints the same as a Markdown table (reference-facts section 22).
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ruamel.yaml import YAML

from _traces import unpacked

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIGS = ROOT / "docs" / "reference-runs" / "fidelity"
TRACE_CACHE = Path(tempfile.gettempdir()) / "kvreplay-fidelity-traces"

REUSE_TOLERANCE = 0.005  # absolute
DURATION_TOLERANCE = 0.01  # relative
TTFT_TOLERANCE = 0.10  # relative


def plain_trace(path: Path) -> Path:
    """`path` itself, or for a gzipped trace its unpacked copy in the cache (kept between runs)."""
    return unpacked(path, TRACE_CACHE / f"{path.parent.name}-{path.stem}") if path.suffix == ".gz" else path


def runnable_copy(config: Path, folder: Path) -> Path:
    """The config with every trace path absolute and plain, written into `folder` (both tools run this file)."""
    yaml = YAML()
    document = yaml.load(config.read_text())
    source = (document.get("traffic") or {}).get("source") or {}
    if "paths" in source:
        source["paths"] = [str(plain_trace((config.parent / p).resolve())) for p in source["paths"]]
    copy = folder / config.name
    text = io.StringIO()
    yaml.dump(document, text)
    copy.write_text(text.getvalue())
    return copy


def predict(command: list[str], config: Path, output: Path) -> dict:
    """The summary one tool prints for `config`, with the per-request rows' readmissions summed in."""
    done = subprocess.run([*command, "predict", "-c", str(config), "--format", "json", "--capture-per-request",
                           "--output-dir", str(output), "--overwrite"], capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:] or ["exit status"]}
    summary = json.loads(done.stdout)
    rows = [json.loads(line) for line in (output / "requests.jsonl").read_text().splitlines() if line.strip()]
    summary["readmissions"] = sum(row.get("readmission_count") or 0 for row in rows)
    summary["rows"] = len(rows)
    return summary


def verdict(reference: dict, ours: dict) -> dict[str, bool]:
    """Which of issue 13's tolerances the pair meets (reuse, duration, TTFT)."""
    def relative(key: str) -> float:
        expected = reference.get(key) or 0.0
        actual = ours.get(key) or 0.0
        return abs(actual - expected) / expected if expected else abs(actual)
    reuse = abs((ours.get("prefix_cache_reused_ratio") or 0.0) - (reference.get("prefix_cache_reused_ratio") or 0.0))
    return {"reuse": reuse <= REUSE_TOLERANCE, "duration": relative("duration_ms") <= DURATION_TOLERANCE,
            "ttft": relative("mean_ttft_ms") <= TTFT_TOLERANCE}


COLUMNS = (("completed_requests", "{:,}"), ("prefix_cache_reused_ratio", "{:.4f}"), ("duration_ms", "{:,.1f}"),
           ("mean_ttft_ms", "{:,.2f}"), ("mean_tpot_ms", "{:.3f}"), ("readmissions", "{:,}"))


def cells(summary: dict) -> list[str]:
    if "error" in summary:
        return [f"error: {' '.join(summary['error'])[:80]}"] + [""] * (len(COLUMNS) - 1)
    return [form.format(summary.get(key) or 0) for key, form in COLUMNS]


def table(results: list[tuple[str, dict, dict]], markdown: bool) -> str:
    header = ["config", "tool", "completed", "reuse", "duration ms", "mean TTFT ms", "mean TPOT ms", "readmits",
              "verdict"]
    lines = []
    for name, reference, ours in results:
        if "error" in reference or "error" in ours:
            mark = "both refuse" if "error" in reference and "error" in ours else "FAIL (one refuses)"
        else:
            failed = [tolerance for tolerance, ok in verdict(reference, ours).items() if not ok]
            mark = "pass" if not failed else "FAIL " + ",".join(failed)
            if reference.get("completed_requests") != ours.get("completed_requests"):
                mark += " (completed differ)"
        lines.append([name, "AISimulate", *cells(reference), ""])
        lines.append(["", "kvreplay", *cells(ours), mark])
    if markdown:
        rows = [header, ["---"] * len(header), *lines]
        return "\n".join("| " + " | ".join(row) + " |" for row in rows)
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header, *lines])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="?", type=Path, default=DEFAULT_CONFIGS, help="a folder of predict YAMLs")
    parser.add_argument("--aisimulate", metavar="PATH", required=True, help="an aisimulate executable")
    parser.add_argument("--kvreplay", metavar="COMMAND", help="run kvreplay as COMMAND (split on spaces; default: "
                        "this interpreter's `-m kvreplay`), e.g. a wrapper that tries a change")
    parser.add_argument("--only", metavar="TEXT", action="append", help="run only configs whose name contains TEXT")
    parser.add_argument("--output-dir", type=Path, help="keep both tools' outputs here (default: a temporary folder)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every summary pair to FILE")
    args = parser.parse_args()
    configs = sorted(args.configs.glob("*.yaml"))
    if args.only:
        configs = [c for c in configs if any(text in c.stem for text in args.only)]
    if not configs:
        sys.exit(f"no config in {args.configs}")
    tools = {"aisimulate": [args.aisimulate],
             "kvreplay": args.kvreplay.split() if args.kvreplay else [sys.executable, "-m", "kvreplay"]}
    with tempfile.TemporaryDirectory() as scratch:
        work = args.output_dir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        results = []
        for config in configs:
            copy = runnable_copy(config, work)
            pair = {tool: predict(command, copy, work / config.stem / tool) for tool, command in tools.items()}
            results.append((config.stem, pair["aisimulate"], pair["kvreplay"]))
            print(f"ran {config.stem}", file=sys.stderr, flush=True)
    print(table(results, args.markdown))
    passed = sum(1 for _, a, k in results
                 if "error" not in a and "error" not in k and all(verdict(a, k).values()))
    print(f"\n{passed} of {len(results)} within tolerance (|delta reuse| <= {REUSE_TOLERANCE}, duration within "
          f"{DURATION_TOLERANCE:.0%}, mean TTFT within {TTFT_TOLERANCE:.0%})")
    if args.json:
        keep = [key for key, _ in COLUMNS] + ["num_requests", "rejected_requests", "total_input_tokens",
                                              "total_output_tokens", "preemptions", "rows", "error"]
        args.json.write_text(json.dumps({name: {"aisimulate": {k: a[k] for k in keep if k in a},
                                                "kvreplay": {k: b[k] for k in keep if k in b}}
                                         for name, a, b in results}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
