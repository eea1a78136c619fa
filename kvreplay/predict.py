"""`kvreplay predict`: compile a config, replay it, write and show the results.

Exit codes follow AISimulate's predict: 0 ok, 1 run failure (the replay could
not run, or no request completed), 2 config or usage error.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import report
from .compiler.pipeline import compile_file
from .runtime.outputs import files as outputs
from .runtime.outputs import metrics, opal_run, sections
from .runtime.build import ReplayUnsupported, build

EXIT_OK, EXIT_RUN, EXIT_CONFIG = 0, 1, 2
DEFAULT_OUTPUT = "kvreplay-output"


def add_arguments(p, config_required: bool = True) -> None:
    if config_required:
        p.add_argument("-c", "--config", required=True, metavar="FILE", help="predict YAML config (or a ReplaySpec)")
    p.add_argument("--stack", default="engine", choices=("engine",), help="only the engine stack is replayed")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override a config value")
    p.add_argument("--output-dir", default=None, metavar="DIR",
                   help="where prediction.json (and requests.jsonl, kv-events.jsonl; opal's files for an opal config) "
                        "go (default: ./kvreplay-output; for an opal config, opal's simulation-runs/sim-<time>/)")
    p.add_argument("--overwrite", action="store_true", help="replace outputs already in --output-dir")
    p.add_argument("--format", choices=("table", "json"), default="table", help="what stdout shows")
    p.add_argument("--capture-per-request", action="store_true", help="also write requests.jsonl")
    p.add_argument("--capture-kv-events", action="store_true",
                   help="also write kv-events.jsonl (Stored/Removed block events per DP rank)")
    p.add_argument("--single-step", action="store_true", help="advance one scheduler pass at a time (checking)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal")


class Progress:
    """A one-line progress bar on stderr, only when it is a terminal."""

    def __init__(self, total_hint: int | None):
        self.total = total_hint
        self.ticks = 0

    def __call__(self, replay) -> None:
        self.ticks += 1
        if self.ticks % 2000:
            return
        done = sum(1 for r in replay.requests if r.terminal_ns is not None)
        total = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\rreplaying: {done}{total} requests done, t = {replay.now / 1e9:,.1f} s virtual")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * 72 + "\r")


def run(args, config: str | None = None) -> int:
    args.config = config or args.config
    result = compile_file(args.config, args.set)
    if result.diagnostics:
        sys.stderr.write(report.text_report([result]))
        return EXIT_CONFIG
    plan = result.plan.records
    if plan is None:
        sys.stderr.write(f"kvreplay: {args.config}: this plan cannot be replayed: {result.plan.not_replayable}\n")
        return EXIT_RUN
    destination = Path(args.output_dir or (opal_run.default_folder() if plan.opal is not None else DEFAULT_OUTPUT))
    if not args.overwrite and outputs.existing(destination):
        sys.stderr.write(f"kvreplay: {outputs.existing(destination)[0]} exists; pass --overwrite or "
                         "choose another --output-dir\n")
        return EXIT_CONFIG
    try:
        replay = build(plan, single_step=args.single_step)
    except ReplayUnsupported as error:
        sys.stderr.write(f"kvreplay: {args.config}: {error}\n")
        return EXIT_RUN
    try:  # before the replay runs: a destination that cannot take the outputs is known now, not after the run
        outputs.prepare(destination, args.overwrite)
    except (outputs.OutputExists, outputs.OutputError) as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_CONFIG
    kv_log = replay.capture_kv_events() if args.capture_kv_events else None
    ledger = opal_run.attach_ledger(replay) if plan.opal is not None else None
    progress = None
    if sys.stderr.isatty() and not args.no_progress:
        progress = Progress(replay.traffic.request_limit)
        replay.on_progress = progress
    replay.run()
    if progress:
        progress.close()
    end_ns = replay.close()
    summary = metrics.summary(replay.requests, end_ns, plan.eviction_policy)
    summary.update(sections.summary_sections(replay))
    opal_files = None
    if ledger is not None:
        ledger.close()
        summary["stages"], opal_files = opal_run.opal_outputs(replay, plan.opal, ledger, end_ns, str(destination))
    prediction = {"summary": summary, "kvreplay_plan_version": plan.plan_version}
    ordered = sorted(replay.requests, key=lambda r: r.spec.index)
    capture = args.capture_per_request or plan.record_per_request
    records = [metrics.request_record(r) for r in ordered] if capture else None
    if records is not None and plan.opal is not None:
        records = [{**record, **opal_run.request_fields(r)} for record, r in zip(records, ordered)]
    try:
        outputs.write(destination, prediction,
                      {"requests.jsonl": records, "kv-events.jsonl": kv_log.records if kv_log else None},
                      args.overwrite, opal_files)
    except outputs.OutputExists as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_CONFIG
    except outputs.OutputError as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_RUN
    sys.stdout.write(outputs.canonical(prediction).decode() if args.format == "json" else outputs.table(summary))
    if replay.stalled:
        sys.stderr.write(f"kvreplay: the replay stalled with {replay.stalled} request(s) unable to progress\n")
        return EXIT_RUN
    if not summary["completed_requests"]:
        sys.stderr.write(f"kvreplay: no request completed: {why_none_completed(replay)}\n")
        return EXIT_RUN
    return EXIT_OK


def why_none_completed(replay) -> str:
    """What a user needs to know when a run completed nothing."""
    requests = replay.requests
    rejected = [r for r in requests if r.status == "rejected"]
    if not requests:
        return "the traffic made no request (check traffic.stop and the trace)"
    if len(rejected) == len(requests):
        return f"all {len(requests)} requests were rejected on arrival, e.g. {rejected[0].spec.index}: " \
               f"{rejected[0].reason}"
    if replay.stopped_at is not None:
        return (f"the run stopped at {replay.stopped_at / 1e9:g} s of virtual time before any request finished "
                "(traffic.stop.max_virtual_time_seconds)")
    return f"{len(requests) - len(rejected)} request(s) were admitted but none finished"
