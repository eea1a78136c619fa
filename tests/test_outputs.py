"""Where a run's outputs go (issue 19, item 4): a destination that cannot take them is refused before the
replay; a write that fails leaves no set of files that looks complete; --overwrite leaves no earlier run's
files that look current."""
from __future__ import annotations

import errno
import io
from pathlib import Path

import pytest

from kvreplay.cli import main
from kvreplay.runtime.outputs import files
from kvreplay.runtime.shell.replay import Replay

from .support import EXAMPLES

CONFIG = str(EXAMPLES / "g1-default-capacity.yaml")


def predict(out: Path, *flags: str) -> int:
    return main(["predict", "-c", CONFIG, "--output-dir", str(out), "--no-progress", "--capture-per-request", *flags])


def test_a_file_as_output_dir_is_refused_before_the_replay(tmp_path, capsys, monkeypatch):
    (tmp_path / "out").write_text("not a folder")
    monkeypatch.setattr(Replay, "run", lambda self: pytest.fail("the replay ran"))
    assert predict(tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file, not a folder" in err and "Traceback" not in err


def test_an_output_dir_under_a_file_is_refused_before_the_replay(tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(Replay, "run", lambda self: pytest.fail("the replay ran"))
    assert predict(tmp_path / "file" / "out") == 2
    err = capsys.readouterr().err
    assert err.startswith("kvreplay: cannot write into") and err.count("\n") == 1


def test_a_full_disk_leaves_no_complete_looking_outputs(tmp_path, capsys, monkeypatch):
    """A run with --overwrite over an earlier run's outputs, whose second file hits ENOSPC: one line, exit 1,
    and neither the earlier run's files nor a half-written new set is left."""
    out = tmp_path / "out"
    assert predict(out) == 0 and sorted(p.name for p in out.iterdir()) == ["prediction.json", "requests.jsonl"]
    capsys.readouterr()
    real = Path.open

    class FullDisk(io.BytesIO):
        def write(self, data):  # (the spool writes a chunk of records at once)
            raise OSError(errno.ENOSPC, "No space left on device")

        writelines = write

    def full_disk(path, mode="r", *args, **kwargs):  # requests.jsonl's records are written as requests end
        if path.name.startswith(".requests.jsonl.partial"):
            real(path, mode).close()  # (the file exists, as on a disk that fills up while it is written)
            return FullDisk()
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full_disk)
    assert predict(out, "--overwrite") == 1
    err = capsys.readouterr().err
    assert err == f"kvreplay: cannot write {out}: No space left on device\n"
    assert list(out.iterdir()) == []


def test_the_new_summary_lands_last(tmp_path, monkeypatch):
    """Files replace the earlier run's only when all are written; prediction.json is renamed last."""
    renamed = []
    real = Path.replace

    def recording(path, target):
        renamed.append(Path(target).name)
        return real(path, target)

    monkeypatch.setattr(Path, "replace", recording)
    assert predict(tmp_path / "out") == 0
    assert renamed == ["requests.jsonl", "prediction.json"]
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


def test_overwrite_removes_the_earlier_run_before_replaying(tmp_path, monkeypatch):
    """An --overwrite run interrupted during the replay leaves no earlier outputs that would look current."""
    out = tmp_path / "out"
    assert predict(out) == 0

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Replay, "run", interrupted)
    assert predict(out, "--overwrite") == 130
    assert list(out.iterdir()) == []


def test_prepare_refuses_to_replace_without_overwrite(tmp_path):
    (tmp_path / "prediction.json").write_text("{}")
    with pytest.raises(files.OutputExists):
        files.prepare(tmp_path, overwrite=False)
    assert (tmp_path / "prediction.json").exists()


class _FullDisk:
    """A stdout whose device is full."""

    def __init__(self):
        self.buffer = self

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass


def test_a_full_stdout_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdout", _FullDisk())
    assert main(["schema"]) == 1
    assert capsys.readouterr().err == "kvreplay: cannot write the output: No space left on device\n"


def test_compile_into_an_unwritable_place_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    target = tmp_path / "file" / "plan.json"
    assert main(["compile", CONFIG, "-o", str(target)]) == 1
    assert capsys.readouterr().err == f"kvreplay: cannot write {target}: Not a directory\n"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out == "kvreplay 0.1.0\n"


def test_a_file_given_as_pieces_is_written_piece_by_piece_and_lands_whole(tmp_path):
    """opal's long files (opal_stats.json, simulation.log) are handed over as pieces, drawn only while their file
    is written: the file holds every piece in order, and when a piece fails nothing that looks complete is left."""
    drawn = []

    def pieces(fail: bool = False):
        for text in (b"{\n", b'    "a": [1, 2]', b"\n}"):
            drawn.append(text)
            if fail and len(drawn) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            yield text

    stream = pieces()
    assert drawn == []  # (a generator: nothing is rendered before the write)
    files.write(tmp_path / "run", {"x": 1}, {}, False, {"stage_0/opal_stats.json": stream})
    assert (tmp_path / "run" / "stage_0" / "opal_stats.json").read_bytes() == b'{\n    "a": [1, 2]\n}'
    assert (tmp_path / "run" / "prediction.json").exists()
    drawn.clear()
    with pytest.raises(files.OutputError):
        files.write(tmp_path / "failed", {"x": 1}, {}, False, {"stage_0/opal_stats.json": pieces(fail=True)})
    assert not (tmp_path / "failed" / "prediction.json").exists()
    assert not (tmp_path / "failed" / "stage_0" / "opal_stats.json").exists()
