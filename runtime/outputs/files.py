"""Write a replay's outputs: prediction.json, requests.jsonl, and the terminal summary table.

Canonical JSON (sorted keys), requests in creation order, nothing wall-clock
in the files; an existing output directory is refused unless `overwrite`.
"""
from __future__ import annotations

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


OUTPUT_FILES = ("prediction.json", "requests.jsonl", "kv-events.jsonl")


def existing(directory: Path) -> list[Path]:
    return [directory / name for name in OUTPUT_FILES if (directory / name).exists()]


def write(directory: Path, prediction: dict, line_files: dict[str, list[dict] | None], overwrite: bool) -> list[Path]:
    """prediction.json, plus one JSON-lines file per entry of `line_files` that is not None."""
    contents = {"prediction.json": canonical(prediction)}
    contents.update({name: jsonl(records) for name, records in line_files.items() if records is not None})
    targets = [directory / name for name in contents]
    clobbered = [t for t in targets if t.exists()]
    if clobbered and not overwrite:
        raise OutputExists(f"{clobbered[0]} exists; pass --overwrite or choose another --output-dir")
    directory.mkdir(parents=True, exist_ok=True)
    for stale in existing(directory):  # with --overwrite, no file of an earlier run is left beside these
        if stale.name not in contents:
            stale.unlink()
    for target, data in zip(targets, contents.values()):
        target.write_bytes(data)
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
