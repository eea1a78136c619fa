"""`kvreplay recommend -c config.yaml`: run the sweep, resume its ledger, write and show the recommendation.

Outputs in --output-dir: ledger.jsonl (one line per candidate), recommendation.json (best, Pareto
front, rejected candidates with their rule errors) and best-plan.json (the best candidate's plan,
ready for `kvreplay deploy`). Exit codes: 0 a best candidate, 1 none meets the SLA (or none ran),
2 a config or usage error.
"""
from __future__ import annotations

import sys
from pathlib import Path

import orjson

from ..compiler import work

EXIT_OK, EXIT_NONE, EXIT_CONFIG = 0, 1, 2
DEFAULT_OUTPUT = "kvreplay-recommend"


def add_arguments(p) -> None:
    from ..predict import work_amount

    p.add_argument("-c", "--config", required=True, metavar="FILE", help="predict YAML with a `recommend` block (required)")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override a config value, left to right (default: none)")
    p.add_argument("--output-dir", default=DEFAULT_OUTPUT, metavar="DIR",
                   help=f"ledger.jsonl, recommendation.json, best-plan.json (default ./{DEFAULT_OUTPUT})")
    p.add_argument("--overwrite", action="store_true", help="start a new ledger instead of resuming the one there")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="candidates replayed at once (default 1)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: a process pool of --jobs workers (default); ray: Ray tasks (pip install "
                        "'kvreplay[ray]')")
    p.add_argument("--address", default=None, metavar="HOST:PORT", help="with --executor ray: the cluster to join (default: a local Ray started for the run)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="what stdout shows: the ranked table (default) or the recommendation as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    p.add_argument("--max-work", type=work_amount, default=work.DEFAULT_MAX_WORK, metavar="STEPS",
                   help="per candidate, as predict's --max-work (default "
                   f"{work.short(work.DEFAULT_MAX_WORK)})")


def _load(args):
    """(document with domains listed, search space, settings) or an error line."""
    # (the search's modules are imported by the command that runs it: every other command builds this parser)
    from ..compiler.diagnostics import CompileError
    from . import pareto, space
    from ..compiler.load import load_bytes

    try:
        loaded = load_bytes(Path(args.config).read_bytes(), args.config)
        document = loaded.document
        if args.set:
            from ..compiler.overrides import apply_overrides

            document, _ = apply_overrides(document, loaded.spans, args.set)
        document, domains = space.extract(document)
        return document, domains, pareto.settings(document["recommend"])
    except OSError as error:
        return f"kvreplay: cannot read {args.config}: {error.strerror or error}"
    except CompileError as error:
        return "\n".join(f"kvreplay: {args.config}: {d.code}: {d.message}" for d in error.diagnostics)
    except (space.SpaceError, pareto.SettingsError) as error:
        return f"kvreplay: {args.config}: {error}"


class Progress:
    """`recommend: 5/16 candidates (4 ok, 1 invalid) | #5 120/800 | #6 40/800` on stderr, only on a
    terminal: the sweep, then each candidate in flight with its requests ended."""

    def __init__(self, total: int, enabled: bool, stream=None):
        self.total, self.enabled, self.counts = total, enabled, {}
        self.stream, self.done, self.flight = stream or sys.stderr, 0, ""

    def __call__(self, done: int, entry: dict) -> None:
        self.counts[entry["status"]] = self.counts.get(entry["status"], 0) + 1
        self.done, self.flight = done, ""
        self.show()

    def running(self, rows: list[tuple[int, int, int]]) -> None:
        self.flight = "".join(f" | #{index} {ended}/{total or '?'}" for index, ended, total in rows)
        self.show()

    def show(self) -> None:
        if self.enabled:
            counts = ", ".join(f"{n} {status}" for status, n in sorted(self.counts.items()))
            line = f"recommend: {self.done}/{self.total} candidates ({counts or 'none yet'}){self.flight}"
            self.stream.write("\r" + line[:150].ljust(72))
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 150 + "\r")


def run(args) -> int:
    from . import executors, ledger, space
    from .candidates import Job

    loaded = _load(args)
    if isinstance(loaded, str):
        sys.stderr.write(loaded + "\n")
        return EXIT_CONFIG
    document, domains, rules = loaded
    try:
        knobs = space.candidates(domains)
    except space.SpaceError as error:
        sys.stderr.write(f"kvreplay: {args.config}: {error}\n")
        return EXIT_CONFIG
    search = ledger.config_hash(document)
    folder = Path(args.output_dir)
    path = folder / "ledger.jsonl"
    try:
        entries = [] if args.overwrite else ledger.read(path, knobs, search)
    except ledger.LedgerMismatch as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_CONFIG
    jobs = [Job(i, knobs[i], orjson.dumps(space.apply(document, knobs[i])), args.config, args.max_work)
            for i in range(len(entries), len(knobs))]
    progress = Progress(len(knobs), sys.stderr.isatty() and not args.no_progress)
    writer = ledger.Writer(path, fresh=args.overwrite)

    def record(entry: dict) -> None:
        entry["search"] = search
        writer.write(entry)
        entries.append(entry)
        progress(len(entries), entry)

    try:
        executors.run(jobs, args.executor, args.jobs, args.address, record,
                      progress.running if progress.enabled else None)
    except executors.ExecutorError as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_CONFIG
    finally:
        writer.close()
        progress.close()
    return finish(args, document, entries, rules, folder)


def finish(args, document: dict, entries: list[dict], rules, folder: Path) -> int:
    """Write recommendation.json and best-plan.json, print the summary."""
    from . import space
    from .report import recommendation, table

    result = recommendation(entries, rules)
    (folder / "recommendation.json").write_bytes(orjson.dumps(result, option=orjson.OPT_SORT_KEYS |
                                                              orjson.OPT_INDENT_2) + b"\n")
    best_plan = folder / "best-plan.json"
    if result["best"] is not None:
        from ..compiler.pipeline import compile_bytes

        best = result["best"]
        compiled = compile_bytes(orjson.dumps(space.apply(document, best["knobs"])), args.config,
                                 base_dir=Path(args.config).resolve().parent)
        best_plan.write_bytes(compiled.plan.canonical_json())
    elif best_plan.exists():
        best_plan.unlink()  # (a stale best from an earlier search must not be deployed by mistake)
    if args.format == "json":
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_SORT_KEYS).decode() + "\n")
    else:
        sys.stdout.write(table(result, str(folder)))
    return EXIT_OK if result["best"] is not None else EXIT_NONE
