"""Write every example's outputs into one folder, to check a refactoring changes no byte of them.

For each `examples/*.yaml`: `predict` with per-request records, `predict` again
with KV events (single stepping), and the ReplaySpec lowering (`compile --to
replayspec`, then `replay`).  Run it before and after a change, then compare the
two folders with `diff -r` (or `--compare OTHER`, which does that and lists what
differs).  Not a timed benchmark: a check people run by hand.
"""
from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "kvreplay", *args], capture_output=True, text=True)
    if done.returncode != 0 or "Traceback" in done.stderr:
        sys.exit(f"kvreplay {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")


def write_all(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)  # (what an earlier run left must not pass for this one's outputs)
    for config in sorted((ROOT / "examples").glob("*.yaml")):
        name = config.stem
        run("predict", "-c", str(config), "--capture-per-request", "--format", "json",
            "--output-dir", str(out / name / "predict"), "--overwrite", "--no-progress")
        run("predict", "-c", str(config), "--capture-kv-events", "--format", "json",
            "--output-dir", str(out / name / "kv-events"), "--overwrite", "--no-progress")
        spec = out / name / "replayspec.json"
        run("compile", str(config), "--to", "replayspec", "-o", str(spec))
        if spec.exists():
            run("replay", str(spec), "--capture-per-request", "--format", "json", "--output-dir", str(out / name / "replay"), "--overwrite")


def differences(left: Path, right: Path) -> list[str]:
    found, pending = [], [filecmp.dircmp(left, right)]
    while pending:
        cmp = pending.pop()
        found += [f"{cmp.left}/{n}" for n in cmp.left_only + cmp.right_only + cmp.diff_files + cmp.funny_files]
        pending += cmp.subdirs.values()
    return sorted(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the outputs into")
    parser.add_argument("--compare", type=Path, metavar="OTHER", help="a folder written before, to compare with")
    args = parser.parse_args()
    write_all(args.out)
    files = sum(1 for p in args.out.rglob("*") if p.is_file())
    if args.compare is None:
        print(f"{files} files written under {args.out}")
        return 0
    diff = differences(args.out, args.compare)
    for path in diff:
        print(f"differs: {path}")
    print(f"{files} files, {len(diff)} differ from {args.compare}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
