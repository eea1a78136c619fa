"""opal's `simulation.log` of a run: its INFO lines in simulation time, then each stage's statistics printout.

A line is ``LEVEL [  12.3 s](origin): message`` (opal's default format, no
colours) with opal's wording, so scripts that read opal's logs read these;
the origin names kvreplay, not an opal source line.  Lines come from the run's
records after it ended (startup, stage starts and ends, tier hits at a
request's first admission, retirements, APC evictions), ordered by time and
then by the order opal writes them.  The printout follows opal's layout
(label padded to 40, value right-aligned to 15 with thousands separators).
"""
from __future__ import annotations

from ..tiers.apc_log import format_apc_enabled

ORIGIN = "kvreplay:0"
GIB = 1 << 30


def line(at_ns: int, message: str, level: str = "INFO") -> str:
    return f"{level} [{at_ns / 1e9:6.1f} s]({ORIGIN}): {message}"


def _number(value: float) -> str:
    return f"{value:g}"


def startup_lines(opal, workers: list, block_size: int, blocks: int, output_dir: str) -> list[str]:
    free = opal.memory_gb * opal.tp * GIB - opal.model_bytes
    out = [f"Simulation results will be stored in: {output_dir}"]
    for _ in workers:
        out.append(f"GPU memory blocks initialized: tp_degree={opal.tp}, per_gpu_memory={_number(opal.memory_gb)}GB, "
                   f"total_memory={_number(opal.memory_gb * opal.tp)}GB, model_size={opal.model_bytes / GIB:.2f}GB, "
                   f"free_memory={free / GIB:.2f}GB, block_size={block_size} tokens, "
                   f"block_size_bytes={block_size * opal.kv_bytes_per_token / 1024:.2f}KB, total_blocks={blocks}")
        if opal.apc is not None:
            out.append(format_apc_enabled(block_size, opal.kvc.chunk_size, opal.apc.ttl_ns))
    out.append(f"Created {len(workers)} workers")
    return out


def tier_tokens(request, apc: int, tiers: dict) -> dict:
    """What a retired request's `kvc tier tokens` lists: APC's tokens, each tier's, then what was computed."""
    out = {"apc": apc} if apc else {}
    out.update({name: tokens for name, tokens in tiers.items() if tokens})
    missed = request.spec.prompt_len - apc - sum(tiers.values())
    if missed > 0:
        out["Cache Miss"] = missed
    return out


def request_lines(request, apc: int, tiers: dict, block_size: int) -> list[tuple[int, str]]:
    """(time, message) of a request: its tier hit at first admission, its retirement."""
    out = []
    prompt = request.spec.prompt_len
    fetched = sum(tiers.values())
    if fetched:
        out.append((request.first_admit_ns, f"[HIT] [TIER] req {request.spec.index}: tiered={fetched} > apc; "
                    f"fetching {fetched}/{prompt} tokens from lower tier ({fetched // block_size} blocks)"))
    if request.status == "completed":
        hit = 100 * (apc + fetched) / prompt if prompt else 0.0
        out.append((request.terminal_ns, f"Request {request.spec.index} retired on worker.{request.rank}: "
                    f"prefill={prompt} tokens, decode={request.generated} tokens, (prefix hit = {hit:.2f}%, "
                    f"sched steps = {request.generated + 1}), kvc tier tokens = {tier_tokens(request, apc, tiers)}"))
    return out


def printout(index: int, entry: dict, tier_tokens_total: dict) -> list[str]:
    """The statistics opal prints for a stage (none for a stage of no duration)."""
    duration = entry["duration_s"]
    if not duration:
        return []

    def row(label: str, value=None) -> str:
        return label if value is None else f"{label:<40}: {value:>15,.2f}"

    out = [f"===== stage_{index} =====", row("============ Serving Benchmark Result ============"),
           row("Note: negative values means that no sensible values can be calculated or just NYI. "), "-" * 50,
           row("Successful requests", entry["finished_requests"]), row("Failed requests", entry["failed_requests"]),
           row("Benchmark duration (s)", duration), row("Total input tokens", entry["input_tokens"]),
           row("Total generated tokens", entry["output_tokens"]),
           row("Request throughput (req/s)", entry["queued_requests"] / duration),
           row("Output token throughput (tok/s)", entry["output_tokens"] / duration),
           row("Peak output token throughput (tok/s)", -1), row("Peak concurrent requests", -1),
           row("Total Token throughput (tok/s)", (entry["input_tokens"] + entry["output_tokens"]) / duration)]
    for title, name in ((" ---------------Time to First Token----------------", "ttft"),
                        (" -----Time per Output Token (excl. 1st token)------", "tpot"),
                        ("---------------Inter-token Latency----------------", "itl")):
        out.append(row(title))
        for label, key in (("Mean", "mean"), ("Median", "median"), ("P99", "p99")):
            value = entry[f"{key}_{name}_ms"]
            out.append(row(f"{label} {name.upper()} (ms)", -1 if value is None else value))
    total = sum(tier_tokens_total.values())
    if total:
        out.append(row("--------------KVC Tier Token Breakdown-------------"))
        names = sorted(name for name in tier_tokens_total if name != "Cache Miss")
        names += ["Cache Miss"] if "Cache Miss" in tier_tokens_total else []
        for name in names:
            tokens = tier_tokens_total[name]
            out.append(row(f"{name} ({100 * tokens / total:.2f}%)", tokens))
    out.append("*" + "-" * 50)
    return out
