"""Mutated example configs run through the CLI in-process (shared by tests/test_fuzz_configs.py and
benchmarks/fuzz_configs.py): one mutation maker driven by any chooser, one runner that reports what went wrong.

A mutation replaces a value (extreme, zero, negative, float, huge, non-finite,
another enum's word), drops a key or adds one; the mutated config is written as
YAML or JSON beside links to the example's folders and trace files (traces, model configs), so
the files it names are still found.  `run` calls `kvreplay validate` and, when
it passes, `kvreplay predict` under a small `--max-work`, each under a CPU-time
alarm (and a wall-time one for hangs that do not compute: a loaded machine
stretches wall time, not CPU time); the result is None when all went as the
CLI promises (exit 0, 1 or 2, no traceback, in time), else what did not.
"""
from __future__ import annotations

import copy
import io
import json
import math
import signal
import sys
import tempfile
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from ruamel.yaml import YAML

from kvreplay.cli import main
from kvreplay.compiler.load import load_bytes

from .support import EXAMPLES

EXAMPLE_FILES = (sorted(EXAMPLES.glob("*.yaml")) + sorted((EXAMPLES / "opal").glob("*.json"))
                 + sorted((EXAMPLES / "agentic").glob("*.yaml")))
BASES = [(path, load_bytes(path.read_bytes(), path.name).document) for path in EXAMPLE_FILES]
NUMBERS = [math.nan, math.inf, -math.inf, 2**64, 10**24, 2**63 - 1, -1, 0, 0.0, 0.5, -0.5, 1e-12, 1e300,
           2**40 - 1, 2**31, 65535, 1_000_000, 86_400_000,
           1, 2, 3, 7, 64, 4096, 100_000, 0.99]  # (and valid ones, for replays with few blocks, many ranks, ...)
WORDS = sorted({"vllm", "sglang", "trtllm", "aggregated", "disaggregated", "fixed", "default", "auto", "synthetic",
                "synthetic-session", "trace", "poisson", "concurrency", "constant_rate", "trace_timestamps", "lru",
                "belady", "cluster_shared", "private", "kv_aware", "round_robin", "roofline", "polynomial", "", "x",
                "h100_sxm", "h200_sxm", "Qwen/Qwen3-8B", "moonshotai/Kimi-K3", "MaxPrefix", "LeastLoaded", "CPUMemory",
                "UniformReqRate", "otel", "mooncake", "256GiB", "32 GB/s", "5us", "1e999 GiB", "-32 GB/s", "0 ms",
                "1.5 B", "18446744073709551616 B", "nan GB/s"})  # (quantities: the config takes units too)
KEYS = sorted({key for _, base in BASES for key in json.dumps(base).replace('"', " ").split() if key.isidentifier()})
VALIDATE_SECONDS = 2.0
MAX_WORK = 300_000  # predict's limit here: well under a second of replay
PREDICT_SECONDS = 20.0  # compile, build and MAX_WORK steps, in CPU seconds
WALL_FACTOR = 6  # a hang that does not compute (blocked, sleeping) is caught by wall time: this many times the limit,
# since a 2-core machine shared by several runs gives one process a fifth of a core at times


def paths(node, prefix=()):
    """The path of every key and item under `node` (not `node` itself), parents before children."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield prefix + (i,)
            yield from paths(value, prefix + (i,))


def parent_of(document, path: tuple):
    """The dict or list that holds `path`'s last step."""
    for part in path[:-1]:
        document = document[part]
    return document


def mutate(choose, document):
    """`document` with one to three mutations; `choose(options)` picks one of a list (hypothesis or random)."""
    document = copy.deepcopy(document)
    for _ in range(choose([1, 1, 2, 3])):
        candidates = list(paths(document))
        if not candidates:
            break
        path = choose(candidates)
        parent = parent_of(document, path)
        action = choose(["number", "number", "word", "drop", "add", "empty"])
        if action == "number":
            parent[path[-1]] = choose(NUMBERS)
        elif action == "word":
            parent[path[-1]] = choose(WORDS)
        elif action == "drop":
            del parent[path[-1]]
        elif action == "empty":
            parent[path[-1]] = choose([{}, [], None])
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][choose(KEYS)] = choose(NUMBERS + WORDS + [{}, [1]])
    return document


def _text(document, syntax: str) -> bytes:
    if syntax == "json":  # (NaN / Infinity as Python writes them: not JSON, which the loader must say)
        return json.dumps(document).encode()
    stream = io.StringIO()
    YAML(typ="safe", pure=True).dump(document, stream)
    return stream.getvalue().encode()


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang


def _cli(argv, seconds: float) -> tuple[int | None, str, float, str | None]:
    """(exit code, stdout + stderr, CPU seconds, what went wrong or None) of `kvreplay argv` in this process,
    stopped past `seconds` of CPU time or WALL_FACTOR times that of wall time."""
    out, err = io.TextIOWrapper(io.BytesIO(), write_through=True), io.StringIO()
    start = time.process_time()
    previous = signal.signal(signal.SIGALRM, _alarm), signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    problem, code = None, None
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    except _Hang:
        problem = f"hang: no end within {seconds:g} CPU s ({seconds * WALL_FACTOR:g} s wall)"
    except BaseException:  # noqa: BLE001 (any exception reaching the user is what this looks for)
        problem = "crash: " + traceback.format_exc(limit=-3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, previous[0])
        signal.signal(signal.SIGPROF, previous[1])
    cpu = time.process_time() - start
    text = out.buffer.getvalue().decode(errors="replace") + err.getvalue()
    if problem is None and code not in (0, 1, 2):
        problem = f"exit code {code!r}"
    if problem is None and "Traceback" in text:
        problem = "a traceback in the output"
    return code, text, cpu, problem


def run(source: Path, document, syntax: str) -> str | None:
    """None when validating (and, when valid, predicting) the mutated `document` kept the CLI's promises."""
    with tempfile.TemporaryDirectory(prefix="kvreplay-fuzz-") as folder:
        folder = Path(folder)
        for sub in source.parent.iterdir():  # the traces and model configs the example names
            if sub.is_dir() or sub.suffix in (".jsonl", ".gz"):
                (folder / sub.name).symlink_to(sub)
        config = folder / f"mutated.{syntax}"
        config.write_bytes(_text(document, syntax))
        code, text, cpu, problem = _cli(["validate", str(config)], VALIDATE_SECONDS * 5)
        if problem is None and cpu > VALIDATE_SECONDS:
            problem = f"validate took {cpu:.1f} CPU s"
        if problem is None and code == 0:
            argv = ["predict", "-c", str(config), "--max-work", str(MAX_WORK), "--no-progress",
                    "--output-dir", str(folder / "out")]
            code, text, cpu, problem = _cli(argv, PREDICT_SECONDS)
        if problem is not None:
            return f"{source.name} as {syntax}: {problem}\n{config.read_text()[:2000]}\n{text[-1500:]}"
    return None


def main_thread_only() -> None:
    """The alarm that catches hangs is a signal: it works in the main thread only."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        sys.exit("the fuzz runner needs the main thread")
