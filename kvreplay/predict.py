"""`kvreplay predict`: compile a config, replay it, write and show the results.

Exit codes follow AISimulate's predict: 0 ok, 1 run failure (the replay could
not run, or no request completed), 2 config or usage error.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
import sys
from pathlib import Path

from . import report
from .compiler import work
from .compiler.diagnostics import locate
from .compiler.pipeline import compile_file
from .runtime.outputs import files as outputs
from .runtime.outputs import metrics, opal_run, sections, timeline
from .runtime.outputs.record_spool import RecordSpool
from .runtime.outputs.request_log import RequestLog

EXIT_OK, EXIT_RUN, EXIT_CONFIG = 0, 1, 2
DEFAULT_OUTPUT = "kvreplay-output"


def add_arguments(p, config_required: bool = True) -> None:
    if config_required:
        p.add_argument("-c", "--config", required=True, metavar="FILE", help="the predict YAML, ReplaySpec JSON or opal JSON config to replay (required)")
    p.add_argument("--stack", default="engine", choices=("engine",), help="the stack to replay (default and only choice: engine)")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override a config value, left to right, units converted (default: none)")
    p.add_argument("--output-dir", default=None, metavar="DIR",
                   help="where prediction.json (and requests.jsonl, kv-events.jsonl; opal's files for an opal config) "
                        "go (default: ./kvreplay-output; for an opal config, opal's simulation-runs/sim-<time>/)")
    p.add_argument("--overwrite", action="store_true", help="replace outputs already in --output-dir")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="what stdout shows: a table (default) or the summary as JSON")
    p.add_argument("--capture-per-request", action="store_true", help="also write requests.jsonl")
    p.add_argument("--capture-kv-events", action="store_true",
                   help="also write kv-events.jsonl (Stored/Removed block events per DP rank)")
    p.add_argument("--capture-timeline", nargs="?", type=interval_ms, const=timeline.DEFAULT_INTERVAL_MS, default=None,
                   metavar="MS", help="also write timeline.jsonl: G1, tiers, batch, queue and preemptions sampled "
                   f"every MS of virtual time (default {timeline.DEFAULT_INTERVAL_MS:g}); passes run one at a time")
    p.add_argument("--report", action="store_true", help="also write report.html (implies --capture-per-request "
                   "and --capture-timeline)")
    p.add_argument("--explain-misses", action="store_true",
                   help="also say why each missed prompt token was not reused (summary and requests.jsonl: "
                        "miss_classes) and add the one-pass LRU miss-ratio curve (miss_ratio_curve)")
    p.add_argument("--single-step", action="store_true", help="advance one scheduler pass at a time (checking)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal")
    p.add_argument("--max-work", type=work_amount, default=work.DEFAULT_MAX_WORK, metavar="STEPS",
                   help="refuse a replay estimated to take more steps than this (prompt blocks plus output "
                        "tokens over all requests, and for an opal config its steps per second of virtual time; "
                        f"e.g. 5e9; default {work.short(work.DEFAULT_MAX_WORK)}, some minutes of replay)")


def interval_ms(text: str) -> float:
    """`--capture-timeline MS`: a positive number of milliseconds of virtual time (at most a year)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of milliseconds") from None
    if not 0 < value <= 3.2e10:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and a year (3.2e10 ms), 0 excluded")
    return value


def work_amount(text: str) -> int:
    """`--max-work` as written: an integer or a float such as 5e9, at least 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of steps (e.g. 5e9)") from None
    if not 1 <= value < 1e30:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 1 and 1e30")
    return int(value)


class Progress:
    """A one-line progress bar on stderr, only when it is a terminal."""

    def __init__(self, total_hint: int | None):
        self.total = total_hint
        self.ticks = 0

    def __call__(self, replay) -> None:
        self.ticks += 1
        if self.ticks % 2000:
            return
        done = replay.log.total
        total = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\rreplaying: {done}{total} requests done, t = {replay.now / 1e9:,.1f} s virtual")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * 72 + "\r")


def run(args, config: str | None = None) -> int:
    # (the runtime is imported here, not at the top: every command builds the argument parser from this module,
    # and `validate` or `--help` need not pay for the replay's imports; the miss analysis, with numpy, is imported
    # only by a run that asks for it)
    from .runtime.build import ReplayUnsupported, build

    args.config = config or args.config
    result = compile_file(args.config, args.set)
    if result.diagnostics:
        sys.stderr.write(report.text_report([result]))
        return EXIT_CONFIG
    plan = result.plan.records
    if plan is None:
        sys.stderr.write(f"kvreplay: {args.config}: this plan cannot be replayed: {result.plan.not_replayable}\n")
        return EXIT_RUN
    too_much = work.check(plan, args.max_work)
    if too_much:
        sys.stderr.write(report.text_report([replace(result, diagnostics=locate(too_much, result.spec.spans,
                                                                                   result.source))]))
        return EXIT_CONFIG
    if args.report and args.capture_timeline is None:
        args.capture_timeline = timeline.DEFAULT_INTERVAL_MS
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
    if getattr(args, "explain_misses", False) and any(w.engine.keyed is False for w in replay.workers):
        sys.stderr.write(f"kvreplay: {args.config}: --explain-misses classifies block keys, which SGLang's radix "
                         "cache does not use; run it with another backend\n")
        return EXIT_CONFIG
    try:  # before the replay runs: a destination that cannot take the outputs is known now, not after the run
        outputs.prepare(destination, args.overwrite)
    except (outputs.OutputExists, outputs.OutputError) as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_CONFIG
    kv_log = replay.capture_kv_events() if args.capture_kv_events else None
    samples = timeline.Timeline.attach(replay, args.capture_timeline) if args.capture_timeline is not None else None
    ledger = opal_run.attach_ledger(replay) if plan.opal is not None else None
    capture = args.capture_per_request or plan.record_per_request or args.report
    record_of = opal_run.request_record if plan.opal is not None else metrics.request_record
    progress = None
    if sys.stderr.isatty() and not args.no_progress:
        progress = Progress(replay.traffic.request_limit)
        replay.on_progress = progress
    spool = None
    explanation = None
    if getattr(args, "explain_misses", False):
        from .runtime.analysis.explain import Explanation

        explanation = Explanation(replay)
    try:
        if capture:
            spool = RecordSpool(outputs.partial_path(destination, "requests.jsonl"), record_of, metrics.FIRST_KEY)
        # (opal's per-stage outputs read every request; other runs keep none: memory follows the requests in flight)
        replay.log = (explanation.log if explanation else RequestLog)(keep=plan.opal is not None, spool=spool)
        replay.log.pack_gaps = plan.opal is not None  # (only opal_stats reads them again, after the run)
        if hasattr(replay.traffic, "measured_log"):  # (agentic warm-up: its requests stay out of the outputs)
            replay.log = replay.traffic.measured_log(replay.log)
        replay.run()
        end_ns = replay.close()
    except outputs.OutputError as error:  # requests.jsonl could not be written as the requests ended
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_RUN
    except BaseException:
        if spool is not None:
            spool.discard()
        raise
    finally:
        if progress:
            progress.close()
    summary = metrics.summary(replay.log, end_ns, plan.eviction_policy, cut=replay.stopped_at is not None)
    summary.update(sections.summary_sections(replay))
    if explanation:
        summary.update(explanation.sections(replay, summary))
    if samples:  # (the ITL CDF drawn exactly, beside the timeline)
        summary["itl_gap_counts_ns"] = timeline.itl_histogram(replay.log)
    opal_files = None
    if ledger is not None:
        ledger.close()
        summary["stages"], opal_files = opal_run.opal_outputs(replay, plan.opal, ledger, end_ns, str(destination))
    # the summary fields at the top level, as AISimulate writes them (a script written for its file reads this one)
    prediction = {**summary, "kvreplay_plan_version": plan.plan_version}
    try:
        spooled = spool.finish() if spool else None
        if explanation and spooled:
            explanation.complete_records(spooled)
        outputs.write(destination, prediction, {"kv-events.jsonl": kv_log.records if kv_log else None,
                                                "timeline.jsonl": samples.close(end_ns) if samples else None},
                      args.overwrite, opal_files, {"requests.jsonl": spooled} if spool else None)
    except outputs.OutputExists as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_CONFIG
    except outputs.OutputError as error:
        sys.stderr.write(f"kvreplay: {error}\n")
        return EXIT_RUN
    if args.report:
        from .report_html.command import write_report

        if not write_report(destination, destination / "report.html"):
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
    log = replay.log
    rejected = log.statuses.get("rejected", 0)
    if not log.total:
        return "the traffic made no request (check traffic.stop and the trace)"
    if rejected == log.total:
        return f"all {log.total} requests were rejected, e.g. {log.first_rejected.spec.index}: " \
               f"{log.first_rejected.reason}"
    if replay.stopped_at is not None:
        return (f"the run stopped at {replay.stopped_at / 1e9:g} s of virtual time before any request finished "
                "(traffic.stop.max_virtual_time_seconds)")
    return f"{log.total - rejected} request(s) were admitted but none finished"
