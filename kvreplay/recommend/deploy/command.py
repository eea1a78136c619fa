"""`kvreplay deploy PLAN_OR_CONFIG --engine ...`: print (or write) the launch of every role.

A file holding a compiled plan (`kvreplay compile`, or a recommend run's best-plan.json) is read as is;
anything else is compiled as a config first, with `--set` overrides. Exit codes as elsewhere: 0 ok,
1 the plan cannot be deployed on that engine, 2 a config or usage error.
"""
from __future__ import annotations

import sys
from pathlib import Path

import orjson

from . import ENGINES, DeployError, generate, text

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def add_arguments(p) -> None:
    p.add_argument("file", metavar="PLAN_OR_CONFIG", help="a compiled plan JSON, or a config to compile")
    p.add_argument("--engine", choices=ENGINES, default=None, help="the engine to launch (default: the "
                   "plan's backend)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: shell commands (default); json: argv and files per role")
    p.add_argument("-o", "--output-dir", default=None, metavar="DIR",
                   help="also write ROLE.sh and each role's files here (default: print only)")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a config value, left to right (default: none)")


def load_plan(path: str, overrides) -> dict | str:
    """The plan as data, or an error message already fit for stderr."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        return f"kvreplay: cannot read {path}: {error.strerror or error}"
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict) and "kvreplay_plan" in document:
        if overrides:
            return "kvreplay: --set applies to a config, not to a compiled plan"
        return document
    from ...compiler.pipeline import compile_file
    from ... import report

    result = compile_file(path, overrides)
    if result.diagnostics:
        return report.text_report([result]).rstrip("\n")
    return orjson.loads(result.plan.canonical_json())


def run(args) -> int:
    plan = load_plan(args.file, args.set)
    if isinstance(plan, str):
        sys.stderr.write(plan + "\n")
        return EXIT_USAGE
    engine = args.engine or plan["engine"].get("backend", "vllm")
    try:
        launches = generate(plan, engine)
    except DeployError as error:
        sys.stderr.write(f"kvreplay: {args.file}: {error}\n")
        return EXIT_INVALID
    if args.output_dir:
        folder = Path(args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for launch in launches:
            for name, body in sorted(launch.files.items()):
                (folder / name).write_text(body)
            (folder / f"{launch.role}.sh").write_text("#!/bin/sh\n" + launch.shell())
    if args.format == "json":
        body = {"engine": engine, "roles": [launch.record() for launch in launches]}
        sys.stdout.write(orjson.dumps(body, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(text(launches, engine))
    return EXIT_OK
