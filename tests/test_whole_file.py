"""`compile -o` and `--to` files are written whole (issue 19, item 4): an interrupted or failed write leaves the
earlier file (or none), never a truncated one under the target's name, and no temporary file either."""
from __future__ import annotations

import errno
import json

import pytest

from kvreplay import whole_file
from kvreplay.cli import main

from .support import EXAMPLES

HOST = str(EXAMPLES / "host-offload-prediction.yaml")


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_compile_o_writes_the_plan_and_no_temporary_file(tmp_path, capsys):
    target = tmp_path / "plan.json"
    assert main(["compile", HOST, "-o", str(target)]) == 0
    assert "kvreplay_plan" in json.loads(target.read_text())
    assert _names(tmp_path) == ["plan.json"]


def _failing_fsync(exception):
    def fsync(fd):
        raise exception
    return fsync


def test_an_interrupted_compile_o_leaves_the_earlier_file(tmp_path, capsys, monkeypatch):
    target = tmp_path / "plan.json"
    target.write_text("the earlier plan\n")
    monkeypatch.setattr(whole_file.os, "fsync", _failing_fsync(KeyboardInterrupt()))  # (Ctrl-C mid-write)
    assert main(["compile", HOST, "-o", str(target)]) == 130
    assert target.read_text() == "the earlier plan\n" and _names(tmp_path) == ["plan.json"]
    assert capsys.readouterr().err == "kvreplay: interrupted\n"


def test_a_full_disk_is_one_line_and_leaves_no_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(whole_file.os, "fsync", _failing_fsync(OSError(errno.ENOSPC, "No space left on device")))
    assert main(["compile", HOST, "-o", str(tmp_path / "plan.json")]) == 1
    assert capsys.readouterr().err == f"kvreplay: cannot write {tmp_path / 'plan.json'}: No space left on device\n"
    assert _names(tmp_path) == []


def test_another_tools_files_are_written_whole(tmp_path, capsys, monkeypatch):
    target = tmp_path / "native.json"
    assert main(["compile", HOST, "--to", "aisimulate-native", "-o", str(target)]) == 0
    written = target.read_bytes()
    assert written and _names(tmp_path) == ["native.json"]
    monkeypatch.setattr(whole_file.os, "fsync", _failing_fsync(OSError(errno.EIO, "Input/output error")))
    assert main(["compile", HOST, "--to", "aisimulate-native", "-o", str(target)]) == 1
    assert target.read_bytes() == written and _names(tmp_path) == ["native.json"]


def test_write_whole_replaces_only_when_complete(tmp_path):
    target = tmp_path / "x.json"
    whole_file.write_whole(target, b"one")
    whole_file.write_whole(target, b"two")
    assert target.read_bytes() == b"two" and _names(tmp_path) == ["x.json"]
    assert whole_file.temporary_path(target).name.startswith(".x.json.partial-")
    with pytest.raises(OSError):
        whole_file.write_whole(tmp_path / "missing" / "x.json", b"three")
