"""Writing one output file whole: under a temporary name beside it, renamed over the target only once complete.

`compile -o plan.json` (and `--to` another tool's files) interrupted by Ctrl-C, a full
disk or a kill used to leave a truncated file under the name a later step reads, looking
finished.  A rename within a folder is atomic, so the target is either the earlier file or
the complete new one; the temporary file is removed when the write fails.  (predict's
output folder does the same for its set of files: runtime/outputs/files.py.)
"""
from __future__ import annotations

import os
from pathlib import Path


def temporary_path(target: Path) -> Path:
    """The name `target` is written under first: hidden, beside it, and no other process's."""
    return target.with_name(f".{target.name}.partial-{os.getpid()}")


def write_whole(target: str | Path, data: bytes) -> None:
    """Write `data` to `target` so that `target` is never a part of it; OSError as `open` raises it."""
    target = Path(target)
    partial = temporary_path(target)
    try:
        with open(partial, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())  # (on disk before the rename makes it the target)
        partial.replace(target)
    except BaseException:  # (Ctrl-C too: no partial file is left behind)
        partial.unlink(missing_ok=True)
        raise
