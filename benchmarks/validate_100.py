"""Benchmark: `kvreplay validate` on 100 config files in one process (target: under 2 s wall).

Makes 100 configs from the examples (with small variations so no two are the
same), runs the CLI once in a subprocess, and prints wall time and peak RSS.
"""
from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_configs(target: Path, count: int = 100) -> list[Path]:
    examples = sorted((ROOT / "examples").glob("*.yaml"))
    paths = []
    for i in range(count):
        source = examples[i % len(examples)]
        text = source.read_text().replace("traces/", str(ROOT / "examples" / "traces") + "/")
        path = target / f"{i:03d}-{source.name}"
        path.write_text(f"# variant {i}\n" + text)
        paths.append(path)
    return paths


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_configs(Path(tmp))
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "kvreplay", "validate", "--quiet", *map(str, paths)],
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"validate {len(paths)} files: exit {done.returncode}, wall {wall:.2f} s, peak RSS {peak_mb:.0f} MB, "
          f"{len(paths) / wall:.0f} files/s")
    if done.returncode != 0:
        print(done.stdout, done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
