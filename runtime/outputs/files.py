"""Write a replay's outputs: prediction.json, requests.jsonl, and the terminal summary table.

Canonical JSON (sorted keys), requests in creation order, nothing wall-clock
in the files; an existing output directory is refused unless `overwrite`.
"""
from __future__ import annotations

import os
from pathlib import Path

import orjson

SUMMARY_ROWS = (("requests (completed / total)", lambda s: f"{s['completed_requests']} / {s['num_requests']}"),
                ("duration", lambda s: f"{s['duration_ms'] / 1e3:.3f} s"),
                ("throughput", lambda s: _fmt(s["request_throughput_rps"], " req/s")),
                ("output tokens/s", lambda s: _fmt(s["output_throughput_tok_s"], "")),
                ("TTFT mean / p99", lambda s: f"{_fmt(s['mean_ttft_ms'], ' ms')} / {_fmt(s['p99_ttft_ms'], ' ms')}"),
                ("TPOT mean", lambda s: _fmt(s["mean_tpot_ms"], " ms")),
                ("E2E mean / p99", lambda s: f"{_fmt(s['mean_e2e_latency_ms'], ' ms')} / "
                                             f"{_fmt(s['p99_e2e_latency_ms'], ' ms')}"),
                ("prefix reuse (all / first admission)",
                 lambda s: f"{_fmt(s['prefix_cache_reused_ratio'], '')} / "
                           f"{_fmt(s['first_admission_prefix_cache_reused_ratio'], '')}"),
                ("preemptions", lambda s: str(s["preemptions"])),
                ("rejected", lambda s: str(s["rejected_requests"])))


def _fmt(value, unit: str) -> str:
    return "-" if value is None else f"{value:,.4g}{unit}" if abs(value) < 1 else f"{value:,.2f}{unit}"


def canonical(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def jsonl(records) -> bytes:
    return b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in records)


class OutputExists(FileExistsError):
    pass


OUTPUT_FILES = ("prediction.json", "requests.jsonl", "kv-events.jsonl", "timeline.jsonl", "report.html",
                "sim_config.json", "simulation.log")
STAGE_FILES = "stage_*/opal_stats.json"  # opal's layout, for an opal config


class OutputError(OSError):
    """The outputs cannot be written where asked (the message says where and why, in one line)."""


def existing(directory: Path) -> list[Path]:
    found = [directory / name for name in OUTPUT_FILES if (directory / name).exists()]
    return found + sorted(directory.glob(STAGE_FILES)) if directory.is_dir() else found


def check_destination(directory: Path) -> None:
    """Before a replay: can outputs be written into `directory`?  Creates it, and writes and removes a probe
    file there; raises OutputError with the reason otherwise (a file in the way, no permission, ...)."""
    try:
        if directory.exists() and not directory.is_dir():
            raise OutputError(f"{directory} is a file, not a folder; choose another --output-dir")
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".kvreplay-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OutputError:
        raise
    except OSError as error:
        raise OutputError(f"cannot write into {directory}: {error.strerror or error}") from None


def prepare(directory: Path, overwrite: bool) -> None:
    """Before a replay: refuse to replace an earlier run's outputs without `overwrite`, check that the folder can
    take the outputs, and (with `overwrite`) remove the earlier run's files, so that a run interrupted before it
    writes leaves none that looks current."""
    earlier = existing(directory)
    if earlier and not overwrite:
        raise OutputExists(f"{earlier[0]} exists; pass --overwrite or choose another --output-dir")
    check_destination(directory)
    try:
        for path in sorted(earlier, key=lambda path: path.name != "prediction.json"):
            path.unlink()
    except OSError as error:
        raise OutputError(f"cannot remove {directory}'s earlier outputs: {error.strerror or error}") from None


def partial_path(directory: Path, name: str) -> Path:
    """Where output `name` is written until every output is complete (a name no output has)."""
    target = directory / name
    return target.with_name(f".{target.name}.partial-{os.getpid()}")


def write(directory: Path, prediction: dict, line_files: dict[str, list[dict] | None], overwrite: bool,
          other_files: dict | None = None, written: dict[str, Path] | None = None) -> list[Path]:
    """prediction.json, plus one JSON-lines file per entry of `line_files` that is not None, plus `other_files`
    (path relative to `directory` -> bytes, or an iterable of byte pieces: opal's layout), plus the files already `written` to their
    `partial_path` while the replay ran (name -> that path: requests.jsonl's record spool).

    All are written under temporary names first; only when every one is complete do they replace the files of
    an earlier run (whose prediction.json goes first and comes back last), so an interrupted or failed write
    never leaves a set of files that looks complete."""
    contents = {"prediction.json": canonical(prediction)}
    contents.update({name: jsonl(records) for name, records in line_files.items() if records is not None})
    contents.update(other_files or {})
    written = written or {}
    targets = [directory / name for name in [*contents, *written]]
    clobbered = [t for t in targets if t.exists()]
    if clobbered and not overwrite:
        for partial in written.values():
            partial.unlink(missing_ok=True)
        raise OutputExists(f"{clobbered[0]} exists; pass --overwrite or choose another --output-dir")
    pending = [(directory / name, partial_path(directory, name)) for name in [*contents, *written]]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for (_, partial), data in zip(pending, contents.values()):
            partial.parent.mkdir(exist_ok=True)
            if isinstance(data, bytes):
                partial.write_bytes(data)
            else:  # (pieces, in order: a long file is never whole in memory)
                with partial.open("wb") as out:
                    out.writelines(data)
        # what an earlier run left goes first, its summary before everything (with --overwrite, no file of an
        # earlier run is left beside these); the new summary comes last, when the rest is in place
        for stale in sorted(existing(directory), key=lambda path: path.name != "prediction.json"):
            stale.unlink()
        for target, partial in sorted(pending, key=lambda pair: pair[0].name == "prediction.json"):
            partial.replace(target)
    except OSError as error:
        for _, partial in pending:
            partial.unlink(missing_ok=True)
        raise OutputError(f"cannot write {directory}: {error.strerror or error}") from None
    return targets


# rows shown only when the run has the section they read
TIER_ROWS = (("g2_domains", "G2 blocks (stored / restored)",
              lambda s: f"{sum(d['stores'] for d in s):,} / {sum(d['restores'] for d in s):,}"),
             ("g3_offload", "G3 blocks (written / read)", lambda s: f"{s['write_blocks']:,} / {s['read_blocks']:,}"),
             ("kvcr", "KVCR pulls (blocks, loaded)",
              lambda s: f"{sum(s['pulls'].values()):,} ({s['blocks']:,}, {s['loaded_blocks']:,})"))


def table(summary: dict) -> str:
    rows = [(label, show(summary)) for label, show in SUMMARY_ROWS]
    rows += [(label, show(summary[key])) for key, label, show in TIER_ROWS if key in summary]
    width = max(len(label) for label, _ in rows)
    return "".join(f"{label:<{width}}  {value}\n" for label, value in rows)
