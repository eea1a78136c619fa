"""Golden snapshots as readable files under golden/<stage>/<name>.json (syrupy extension).

`pytest --snapshot-update` rewrites them; a diff there is reviewed like code.
"""
from __future__ import annotations

from pathlib import Path

import orjson
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

ROOT = Path(__file__).resolve().parent.parent


def golden_extension(stage: str):
    class GoldenJSON(SingleFileSnapshotExtension):
        file_extension = "json"
        _write_mode = WriteMode.TEXT

        @classmethod
        def dirname(cls, *, test_location) -> str:
            return str(ROOT / "golden" / stage)

        @classmethod
        def get_snapshot_name(cls, *, test_location, index=0) -> str:
            return str(index)

        def serialize(self, data, **kwargs) -> str:
            return orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode() + "\n"

    GoldenJSON.__name__ = f"Golden_{stage.replace('/', '_')}"
    return GoldenJSON
