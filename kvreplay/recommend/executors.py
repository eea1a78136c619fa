"""Where candidates run: in this process, on a local process pool (`--jobs N`), or on a Ray cluster.

Every executor hands results back in candidate-index order, whatever order they finish in, so the
ledger's bytes do not depend on the executor or the number of workers. Ray is imported only when
asked for; it is the optional extra `kvreplay[ray]`.
"""
from __future__ import annotations

import multiprocessing
import signal
import socket
from typing import Callable, Iterable, Iterator

from .candidates import Job, evaluate

Running = Callable[[list[tuple[int, int, int]]], None]  # [(candidate index, requests ended, requests)]
_slot = None  # in a pool worker: (its row of the shared progress table, the table)


class ExecutorError(RuntimeError):
    """The executor cannot start (Ray missing, a cluster address that does not answer)."""


def _start_worker(table, claimed) -> None:
    # Ctrl-C goes to the whole process group: the parent alone decides what an interrupt ends, and
    # terminates the workers itself, so they must not die mid-result with tracebacks of their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _slot
    with claimed.get_lock():
        _slot = (claimed.value, table)
        claimed.value += 1


def _report(index: int, done: int, total: int) -> None:
    row, table = _slot
    table[3 * row: 3 * row + 3] = [index, done, total]


def _evaluate_in_worker(job: Job) -> dict:
    _report(job.index, 0, 0)
    return evaluate(job, _report)


def local(jobs: list[Job], workers: int, running: Running | None = None) -> Iterator[dict]:
    """Entries in index order; `workers` 1 runs in this process (nothing to pickle, easy to debug).
    `running`, if given, is told every half second which candidates run and how far each is."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield evaluate(job, None if running is None else lambda i, d, t: running([(i, d, t)]))
        return
    context = multiprocessing.get_context("fork")
    count = min(workers, len(jobs))
    table, claimed = context.Array("q", [-1] * (3 * count)), context.Value("i", 0)
    pool = context.Pool(count, initializer=_start_worker, initargs=(table, claimed))
    try:
        results = pool.imap(_evaluate_in_worker, jobs, chunksize=1)  # (imap: in order; its workers run ahead)
        for _ in jobs:
            while True:
                try:
                    entry = results.next(timeout=0.5 if running else None)
                    break
                except multiprocessing.TimeoutError:
                    rows = [tuple(table[3 * r: 3 * r + 3]) for r in range(count)]
                    running(sorted(row for row in rows if row[0] >= 0))
            yield entry
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def answers(address: str, timeout_s: float = 3.0) -> bool:
    """Does something listen at a Ray address given as `[ray://]host:port`?  (Ray itself retries a dead address
    for minutes, printing its own logs; "auto" and other forms are left to Ray.)"""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return True
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def ray(jobs: list[Job], workers: int, address: str | None) -> Iterator[dict]:
    """Entries in index order from Ray tasks; a local Ray of `workers` CPUs when no address is given."""
    try:
        import ray as ray_module
    except ImportError:
        raise ExecutorError("--executor ray needs Ray, which is not installed: pip install 'kvreplay[ray]'") from None
    if address and not answers(address):
        raise ExecutorError(f"nothing answers at the Ray address {address}: start the cluster (`ray start --head`) "
                            "or correct --address")
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
            try:
                ray_module.cancel(ref, force=True)
            except Exception:  # (a task that already finished cannot be cancelled; nothing to undo)
                pass
        raise
    finally:
        if started:
            ray_module.shutdown()


def run(jobs: list[Job], executor: str, workers: int, address: str | None,
        on_entry: Callable[[dict], None], running: Running | None = None) -> None:
    """Run `jobs`, calling `on_entry` with each entry in index order as soon as all before it are done
    (and `running` with the candidates in flight, on the local executors)."""
    entries: Iterable[dict] = ray(jobs, workers, address) if executor == "ray" else local(jobs, workers, running)
    for entry in entries:
        on_entry(entry)
