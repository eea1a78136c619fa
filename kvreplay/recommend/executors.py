"""Where candidates run: in this process, on a local process pool (`--jobs N`), or on a Ray cluster.

Every executor hands results back in candidate-index order, whatever order they finish in, so the
ledger's bytes do not depend on the executor or the number of workers. Ray is imported only when
asked for; it is the optional extra `kvreplay[ray]`.
"""
from __future__ import annotations

import multiprocessing
import signal
from typing import Callable, Iterable, Iterator

from .candidates import Job, evaluate


class ExecutorError(RuntimeError):
    """The executor cannot start (Ray missing, a cluster address that does not answer)."""


def _ignore_interrupt() -> None:
    # Ctrl-C goes to the whole process group: the parent alone decides what an interrupt ends, and
    # terminates the workers itself, so they must not die mid-result with tracebacks of their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def local(jobs: list[Job], workers: int) -> Iterator[dict]:
    """Entries in index order; `workers` 1 runs in this process (nothing to pickle, easy to debug)."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield evaluate(job)
        return
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(jobs)), initializer=_ignore_interrupt)
    try:
        yield from pool.imap(evaluate, jobs, chunksize=1)  # (imap: in order; its workers run ahead)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def ray(jobs: list[Job], workers: int, address: str | None) -> Iterator[dict]:
    """Entries in index order from Ray tasks; a local Ray of `workers` CPUs when no address is given."""
    try:
        import ray as ray_module
    except ImportError:
        raise ExecutorError("--executor ray needs Ray, which is not installed: pip install 'kvreplay[ray]'") from None
    started = not ray_module.is_initialized()
    if started:
        try:
            if address:
                ray_module.init(address=address, log_to_driver=False)
            else:
                ray_module.init(num_cpus=max(workers, 1), include_dashboard=False, log_to_driver=False)
        except Exception as error:  # ray raises ConnectionError, RuntimeError, ValueError... on a bad address
            raise ExecutorError(f"cannot start or reach the Ray cluster{' at ' + address if address else ''}: "
                                f"{error}") from None
    refs = []
    try:
        task = ray_module.remote(num_cpus=1)(evaluate)
        refs = [task.remote(job) for job in jobs]
        for ref in refs:
            yield ray_module.get(ref)
    except BaseException:
        for ref in refs:
            ray_module.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray_module.shutdown()


def run(jobs: list[Job], executor: str, workers: int, address: str | None,
        on_entry: Callable[[dict], None]) -> None:
    """Run `jobs`, calling `on_entry` with each entry in index order as soon as all before it are done."""
    entries: Iterable[dict] = ray(jobs, workers, address) if executor == "ray" else local(jobs, workers)
    for entry in entries:
        on_entry(entry)
