"""Read a run folder (what `kvreplay predict` wrote) into one `Run`: its summary, requests and timeline.

prediction.json is required; requests.jsonl and timeline.jsonl are optional (the
report says which sections need them).  Every problem is a `RunDirError` whose
message is one line naming the file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson


class RunDirError(Exception):
    """A run folder that cannot be read (missing, not a run folder, a damaged file): one line for the user."""


@dataclass
class Run:
    path: Path
    summary: dict
    requests: list[dict] = field(default_factory=list)
    timeline: list[dict] = field(default_factory=list)
    has_requests: bool = False
    has_timeline: bool = False

    @property
    def name(self) -> str:
        return self.path.name or str(self.path)

    def completed(self) -> list[dict]:
        return [r for r in self.requests if r.get("terminal_status") == "completed"]


def _json_lines(path: Path) -> list[dict]:
    out = []
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        record = orjson.loads(line)
                    except orjson.JSONDecodeError as error:
                        raise RunDirError(f"{path}:{number}: not a JSON line ({error})") from None
                    if not isinstance(record, dict):
                        raise RunDirError(f"{path}:{number}: a record is a JSON object")
                    out.append(record)
    except OSError as error:
        raise RunDirError(f"cannot read {path}: {error.strerror or error}") from None
    return out


def load_run(folder: str | Path) -> Run:
    path = Path(folder)
    if not path.exists():
        raise RunDirError(f"{path}: no such folder")
    if not path.is_dir():
        raise RunDirError(f"{path} is not a folder (give the --output-dir of a `kvreplay predict` run)")
    prediction = path / "prediction.json"
    if not prediction.is_file():
        raise RunDirError(f"{path} is not a run folder: it has no prediction.json")
    try:
        data = orjson.loads(prediction.read_bytes())
    except OSError as error:
        raise RunDirError(f"cannot read {prediction}: {error.strerror or error}") from None
    except orjson.JSONDecodeError as error:
        raise RunDirError(f"{prediction}: not JSON ({error})") from None
    if not isinstance(data, dict) or "num_requests" not in data:
        raise RunDirError(f"{prediction} has no summary fields (num_requests, ...): not kvreplay's prediction.json")
    run = Run(path, {key: value for key, value in data.items() if key != "kvreplay_plan_version"})
    if (path / "requests.jsonl").is_file():
        run.requests, run.has_requests = _json_lines(path / "requests.jsonl"), True
    if (path / "timeline.jsonl").is_file():
        run.timeline, run.has_timeline = _json_lines(path / "timeline.jsonl"), True
    return run
