"""The `kvreplay` command line: argument parsing and dispatch, nothing else.

Exit codes: 0 ok, 1 an input is invalid (or an output could not be written),
2 usage error (bad arguments, an unreadable file, refusing to overwrite).
Every failure is one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

import orjson

from . import __version__
from . import explain as explain_mod
from . import predict, report
from .compiler.passes.plan import canonical_json
from .compiler.diagnostics import locate
from .compiler.pipeline import CompileResult, compile_file
from .compiler.rules import all_rules
from .whole_file import write_whole

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def _exit_code(results: Sequence[CompileResult]) -> int:
    if any(d.code == "LOAD-FILE" for r in results for d in r.diagnostics):
        return EXIT_USAGE
    return EXIT_INVALID if any(r.diagnostics for r in results) else EXIT_OK


def _write(data: bytes | str) -> None:
    sys.stdout.buffer.write(data.encode() if isinstance(data, str) else data)
    sys.stdout.flush()


def cmd_validate(args) -> int:
    results = [compile_file(path, args.set) for path in args.files]
    if args.format == "json":  # (the report is the result a tool asked for)
        _write(report.json_report(results))
    elif any(r.diagnostics for r in results):  # diagnostics go where every command's go
        sys.stderr.write(report.text_report(results, context=not args.no_context))
    elif not args.quiet:
        _write(report.text_report(results))
    return _exit_code(results)


def _compile_one(args) -> CompileResult | int:
    result = compile_file(args.file, args.set)
    if result.diagnostics:
        sys.stderr.write(report.text_report([result]))
        return _exit_code([result])
    return result


def cmd_compile(args) -> int:
    if args.strict and args.to in ("plan", "replayspec"):
        sys.stderr.write(f"kvreplay: --strict applies to --to another tool's format, not --to {args.to}\n")
        return EXIT_USAGE
    result = _compile_one(args)
    if isinstance(result, int):
        return result
    if args.to not in ("plan", "replayspec"):
        from . import targets

        return targets.run(result, args.to, args.output, args.strict)
    if args.to == "replayspec":
        from .lower import lower, refusal

        if result.spec.frontend == "opal":
            sys.stderr.write(f"kvreplay: {args.file} is an opal config; --to replayspec lowers predict configs only\n")
            return EXIT_USAGE
        if result.spec.frontend != "predict":
            sys.stderr.write(f"kvreplay: {args.file} is already a {result.spec.frontend}\n")
            return EXIT_USAGE
        refused = refusal(result)
        if refused is not None:  # (agentic plays: their dependencies have no place in a request list)
            sys.stderr.write(report.format_diagnostic(locate((refused,), result.spec.spans, result.source)[0]) + "\n")
            return EXIT_INVALID
        data = canonical_json(lower(result))
    else:
        data = result.plan.canonical_json()
    if args.output:
        try:
            write_whole(args.output, data)  # (a temporary name until complete: an interrupted run leaves none)
        except OSError as error:
            sys.stderr.write(f"kvreplay: cannot write {args.output}: {error.strerror or error}\n")
            return EXIT_INVALID
    else:
        _write(data)
    return EXIT_OK


def cmd_explain(args) -> int:
    result = _compile_one(args)
    if isinstance(result, int):
        return result
    _write(explain_mod.json_text(result.spec) if args.format == "json" else explain_mod.text(result.spec))
    return EXIT_OK


def cmd_schema(args) -> int:
    from .compiler.config_units import editor_schema  # (quantities such as `80GiB` pass where a field has a unit)

    _write(orjson.dumps(editor_schema(), option=orjson.OPT_INDENT_2) + b"\n")
    return EXIT_OK


def cmd_rules(args) -> int:
    rules = all_rules()
    if args.format == "json":
        table = [{"id": r.id, "stage": r.stage, "section": r.section, "message": r.message, "hint": r.hint}
                 for r in rules]
        _write(orjson.dumps(table, option=orjson.OPT_INDENT_2) + b"\n")
        return EXIT_OK
    if args.format == "markdown":
        lines = ["| id | stage | message | section |", "| --- | --- | --- | --- |"]
        lines += [f"| `{r.id}` | {r.stage} | {r.message} | {r.section} |" for r in rules]
        _write("\n".join(lines) + "\n")
        return EXIT_OK
    width = max(len(r.id) for r in rules)
    _write("".join(f"{r.id:<{width}}  {r.stage:<8}  {r.message}\n{'':<{width}}  {'':<8}  ({r.section})\n"
                   for r in rules))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvreplay", description="Compile, check and replay LLM-serving "
                                     "KV-cache configurations.")
    parser.add_argument("--version", action="version", version=f"kvreplay {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_set(p):
        p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                       help="override a config value (applied left to right, e.g. "
                            "engine.workers.aggregated.kv_cache.block_size=32 or ...capacity.bytes=80GiB)")

    p = sub.add_parser("validate", help="check config files; all errors at once")
    p.add_argument("files", nargs="+", metavar="FILE", help="predict YAML, ReplaySpec JSON or opal JSON configs")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: located diagnostics for people (default); json: one report for tools")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing when every file is valid")
    p.add_argument("--no-context", action="store_true", help="do not quote the offending source line")
    add_set(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("compile", help="compile one config into its canonical resolved plan (JSON)")
    p.add_argument("file", metavar="FILE", help="the config to compile")
    p.add_argument("-o", "--output", metavar="PLAN.json", help="write the result here (default: stdout)")
    p.add_argument("--to", choices=("plan", "replayspec", "aisimulate-native", "opal", "predict", "dynamo-mocker"),
                   default="plan", help="plan: the canonical resolved plan (default); replayspec: lower a predict "
                   "config into a native ReplaySpec with its traffic expanded; the others: a config for another tool "
                   "(README: Compiling for other tools)")
    p.add_argument("--strict", action="store_true", help="with --to another tool: a field that does not carry "
                   "over is an error, not a warning")
    add_set(p)
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("explain", help="show every resolved knob with its value and provenance")
    p.add_argument("file", metavar="FILE", help="the config to explain")
    p.add_argument("--format", choices=("text", "json"), default="text", help="text: a table (default); json: rows")
    add_set(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("predict", help="replay a config and write prediction.json (and requests.jsonl)")
    predict.add_arguments(p)
    p.set_defaults(func=predict.run)

    p = sub.add_parser("replay", help="replay a native ReplaySpec JSON (same outputs as predict)")
    p.add_argument("spec", metavar="SPEC.json", help="a native ReplaySpec v1 (e.g. from `compile --to replayspec`)")
    predict.add_arguments(p, config_required=False)
    p.set_defaults(func=lambda args: predict.run(args, config=args.spec))

    from .recommend import command as recommend_command
    from .recommend.deploy import command as deploy_command

    p = sub.add_parser("recommend", help="search the searchable knobs of a config and rank the candidates")
    recommend_command.add_arguments(p)
    p.set_defaults(func=recommend_command.run)

    p = sub.add_parser("deploy", help="the engine launch arguments (vLLM, SGLang, TensorRT-LLM) of a plan")
    deploy_command.add_arguments(p)
    p.set_defaults(func=deploy_command.run)

    from .report_html.command import add_commands  # (report, diff)

    add_commands(sub)

    p = sub.add_parser("schema", help="print the JSON Schema of predict configs (for editors)")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("rules", help="print the table of rules with their ids and spec sections")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help="text (default), json, or a markdown table for documentation")
    p.set_defaults(func=cmd_rules)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return EXIT_OK
    except OSError as error:  # most often stdout itself cannot take the output (a full disk, /dev/full)
        _silence_stdout()
        where = error.filename if error.filename is not None else "the output"
        sys.stderr.write(f"kvreplay: cannot write {where}: {error.strerror or error}\n")
        return EXIT_INVALID
    except KeyboardInterrupt:
        sys.stderr.write("kvreplay: interrupted\n")
        return 130


def _silence_stdout() -> None:
    """What could not be written stays unwritten: the interpreter's own flush at exit would fail again."""
    try:
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
