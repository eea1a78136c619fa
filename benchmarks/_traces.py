"""Where the benchmarks find the real Mooncake traces (not a benchmark itself).

They are vendored gzipped in tests/data/traces/; `trace(name)` unpacks one once
into a cache folder under the system's temporary directory (kept between runs,
so that unpacking is not timed) and returns its path.
"""
from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDORED = ROOT / "tests" / "data" / "traces"
CACHE = Path(tempfile.gettempdir()) / "kvreplay-benchmark-traces"


def unpacked(packed: Path, path: Path) -> Path:
    """`path`, holding gzipped `packed` unpacked (again only when `packed` is newer)."""
    if not path.exists() or path.stat().st_mtime < packed.stat().st_mtime:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_bytes(gzip.decompress(packed.read_bytes()))
        partial.replace(path)  # (never a half-written trace under the real name)
    return path


def trace(name: str) -> Path:
    """The unpacked trace `name` (e.g. "conversation_trace.jsonl")."""
    return unpacked(VENDORED / f"{name}.gz", CACHE / name)
