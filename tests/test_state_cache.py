"""State caches in the replay: where a hybrid model's prefix reuse resumes, what its snapshots cost, P/D.

What is checked (kv-cache-tiers.md "State cache"; the model in runtime/tiers/state_snapshots.py; facts §24):

- with `prefix_match_unit` (align mode) a prompt keeps snapshots at its last full block boundary before its
  last token and its last unit boundary, and its prefill chunks end there (the spec's example: block 1,536,
  unit 128, a cold 24,300-token prompt keeps 23,040 and 24,192; a later request sharing 23,700 tokens resumes
  at 23,040); positions reached by its output are not resume points; without it, the rule AISimulate follows
  (Kimi K3: no reuse; explicit bytes: whole blocks);
- a snapshot is the request's own state blocks (one more inside a block), its next pass allocating fresh
  state (or preempting), then a free cached block evicted like any: cached token KV without a snapshot is not
  reused, a bigger G1 keeps the snapshots a small one evicts, and AISimulate's preemptions are matched;
- DeepSeek V4 (rule pass_ends, as AISimulate): a snapshot where a pass leaves a request on a block boundary;
  26 rows of state, 30 with one draft token;
- P/D: the prefill role resumes from its snapshots, the decode role reserves the prompt plus one state and
  skips its resident token KV;
- the `state_cache` section and each admission's `state_resumed_from_tokens`.

Scenarios are Mooncake traces in tmp_path (one hash id per `unit` tokens, so a test chooses which requests
share which prefix units), fixed timing (a pass with prefill 10 ms, decode only 1 ms).
"""
from __future__ import annotations

import json

import pytest

from kvreplay.compiler.passes.finish import finish_plan
from kvreplay.compiler.pipeline import compile_bytes
from kvreplay.runtime.build import build
from kvreplay.runtime.outputs.sections import summary_sections
from kvreplay.runtime.tiers.state_snapshots import StateSnapshots

from .scenarios import compile_scenario, replay_both_ways
from .support import ROOT


def config(*, block: int, unit: int, g1_blocks: int, state_bytes: int, bytes_per_token: int = 1,
           set_unit: bool = True, max_batched: int = 32768) -> str:
    """One aggregated vLLM role (Qwen3-8B / H200 with explicit state geometry); the trace has one id per `unit`
    (`set_unit` False: `prefix_match_unit` is left unset, a plain reservation)."""
    unit_line = f"        prefix_match_unit: {unit}\n" if set_unit else ""
    return f"""
engine:
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  workers:
    aggregated:
      timing: {{type: fixed, prefill_ms: 10, decode_ms: 1}}
      scheduler: {{max_batched_tokens: {max_batched}, max_sequences: 4}}
      kv_cache:
        block_size: {block}
{unit_line}        bytes_per_token: {bytes_per_token}
        capacity: {{type: fixed, blocks: {g1_blocks}}}
        state_cache: {{bytes_per_request: {state_bytes}}}
traffic:
  source: {{type: trace, paths: [trace.jsonl], block_size: {unit}}}
  load: {{type: trace_timestamps}}
"""


def trace_row(t: float, prompt: int, output: int, ids: list[int], unit: int) -> dict:
    assert len(ids) == -(-prompt // unit)
    return {"timestamp": t, "input_length": prompt, "output_length": output, "hash_ids": ids}


def replay(tmp_path, rows, text):
    fused, single, records = replay_both_ways(compile_scenario(tmp_path, rows, text, "state.yaml"), tmp_path)
    assert not fused.stalled
    return single, records


def resumed(records) -> list[list[int]]:
    return [[a["state_resumed_from_tokens"] for a in r["admission_history"]] for r in records]


# ============================================================================================ the spec's example

SPEC = dict(block=1536, unit=128, g1_blocks=64, state_bytes=3000)  # 1,536-byte blocks: a state is 2 blocks
A_IDS = list(range(190))  # 24,300 tokens: 190 units of 128, the last one partial


def test_positions_of_a_prompts_snapshots():
    """Last full block boundary and last unit boundary; one position when they coincide, none before a unit."""
    assert StateSnapshots.positions(24_300, 1536, 128) == (23_040, 24_192)
    assert StateSnapshots.positions(3_072, 1536, 128) == (1_536, 3_072)
    assert StateSnapshots.positions(3_000, 1536, 1536) == (1_536,)
    assert StateSnapshots.positions(1_000, 1536, 128) == (896,)
    assert StateSnapshots.positions(100, 1536, 128) == ()


def test_a_preempted_request_is_recomputed_as_one_prompt_of_its_known_tokens():
    """Align mode's chunks (64-token blocks, unit 64) for a 2,100-token prompt: fresh, 0-2,048-2,100 (its
    snapshot positions).  Preempted with 63 tokens of output (2,163 known), it is recomputed as one prompt of
    2,163 tokens: 0-2,112-2,163 (one pass past the prompt's end, not one chunk more for its output); resumed at
    2,048 with 77 (2,177 known): 2,048-2,176-2,177.  AISimulate's times for explicit-sessions-unit-g1-200 (facts
    §45) follow only from these chunks."""
    from types import SimpleNamespace
    snapshots = StateSnapshots(SimpleNamespace(prefix_match_unit=64, snapshot_rule="prompt_ends", blocks_per_request=2))
    rank = SimpleNamespace(block_size=64, chunked=True)

    def chunks(known: int, start: int) -> list[int]:
        request = SimpleNamespace(num_tokens=known, spec=SimpleNamespace(prompt_len=2100))
        ends = [start]
        while ends[-1] < known:
            ends.append(ends[-1] + snapshots.chunk(rank, request, ends[-1], known - ends[-1]))
        return ends

    assert chunks(2100, 0) == [0, 2048, 2100]
    assert chunks(2163, 0) == [0, 2112, 2163]
    assert chunks(2177, 2048) == [2048, 2176, 2177]
    assert chunks(2177, 2000) == [2000, 2048, 2176, 2177]  # (from inside a block: its end first)


def test_a_chunk_the_budget_cuts_short_ends_on_a_block_boundary():
    """vLLM's align mode (`_mamba_block_aligned_split`), Kimi K3's 1,536-token blocks and unit 128, a 4,096-token
    prompt: with the budget it runs to its stop (3,072); a budget of 2,046 tokens cuts it to 1,536, one of 1,534 to
    nothing (it waits for the next pass); from a resume at 4,096 inside a block (an 8,448-token prompt) 300 tokens
    do not reach 4,608: nothing.  A pass whose whole budget (1,024) is shorter than the block cuts anywhere."""
    from types import SimpleNamespace
    snapshots = StateSnapshots(SimpleNamespace(prefix_match_unit=128, snapshot_rule="prompt_ends",
                                               blocks_per_request=3))
    rank = SimpleNamespace(block_size=1536, chunked=True, max_batched=8192)
    fresh = SimpleNamespace(num_tokens=4096, spec=SimpleNamespace(prompt_len=4096))
    assert [snapshots.chunk(rank, fresh, 0, new) for new in (4096, 2046, 1534)] == [3072, 1536, 0]
    assert snapshots.chunk(rank, fresh, 1536, 2046) == 1536 and snapshots.chunk(rank, fresh, 3072, 1024) == 1024
    turn = SimpleNamespace(num_tokens=8448, spec=SimpleNamespace(prompt_len=8448))
    assert snapshots.chunk(rank, turn, 4096, 300) == 0 and snapshots.chunk(rank, turn, 4096, 600) == 512
    small = SimpleNamespace(block_size=1536, chunked=True, max_batched=1024)
    assert snapshots.chunk(small, fresh, 0, 1024) == 1024
    # a pass's whole budget of 8,192 tokens is cut like any (the exception is only for a budget shorter than a
    # block): a 120,633-token prompt at 23,040 runs 7,680 (it ran 8,192 and then 1,024 to the next boundary, which
    # left that budget to the waiting requests; AISimulate admits none of them, facts section 77)
    huge = SimpleNamespace(num_tokens=120_633, spec=SimpleNamespace(prompt_len=120_633))
    assert snapshots.chunk(rank, huge, 23_040, 8192) == 7680


def test_a_waiting_request_whose_chunk_makes_no_block_stops_admission(tmp_path):
    """vLLM's waiting loop stops (`break`) at a request whose aligned chunk is 0 tokens; nothing behind it is
    tried (its running loop skips such a request and goes on).  Block 64, unit 32, 100 tokens a pass, a state of
    2 blocks.  P (96 tokens, units [1, 2, 3]) runs 0-64 and 64-96 and keeps snapshots at 64 and 96 (its end: with
    a block of its own).  Q (128 tokens) arrives at 30 and runs 0-64, then 64-128 at 40, which leaves 36 tokens of
    budget.  X (64 tokens, from 0) and Y (128 tokens, P's 96 units then its own) arrive at 35: at 40, 36 tokens
    cut X's chunk to no block, so Y waits too, though its chunk from P's snapshot at 96 to its block's end is 32
    tokens; both are admitted at 50 and get their first token at 60 (Y before: admitted at 40, first token at 50).
    AISimulate: the same admissions, reuse (Y 96) and first tokens (facts section 77)."""
    rows = [trace_row(0, 96, 1, [1, 2, 3], 32), trace_row(30, 128, 1, [10, 11, 12, 13], 32),
            trace_row(35, 64, 1, [20, 21], 32), trace_row(35, 128, 1, [1, 2, 3, 30], 32)]
    _, records = replay(tmp_path, rows, config(block=64, unit=32, g1_blocks=64, state_bytes=1500,
                                               bytes_per_token=16, max_batched=100))
    assert [r["admission_history"][0]["at_ms"] for r in records] == [0.0, 30.0, 50.0, 50.0]
    assert resumed(records) == [[0], [0], [0], [96]]
    assert [r["first_token_ms"] for r in records] == [20.0, 50.0, 60.0, 60.0]


def test_kimi_k3_under_a_small_g1_admits_whole_block_chunks(tmp_path):
    """docs/reference-runs/state/heldout-kimi-g1-100-fixed (Kimi K3, 100 blocks of 1,536, 8 sessions, 8,192 tokens a
    pass, 50 ms a pass with prefill): the first pass runs 3,072 + 3,072 + 1,536 (not 2,048: cut to a block), so
    the eight first turns get their first tokens at 100, 100, 170, 170, 240, 240, 310, 380 ms (the seventh waits at
    100 ms: 1,534 tokens of budget make no block).  AISimulate: every request's admissions and times the same."""
    path = tmp_path / "c.yaml"
    path.write_text((ROOT / "docs/reference-runs/state/heldout-kimi-g1-100-fixed.yaml").read_text())
    from .test_replay import replay as replay_config
    summary, records = replay_config(path, tmp_path / "out")
    first = sorted(r["first_token_ms"] for r in records if r["turn_index"] == 0)[:8]
    assert first == [100.0, 100.0, 170.0, 170.0, 240.0, 240.0, 310.0, 380.0]
    assert round(summary["prefix_cache_reused_ratio"], 5) == 0.04040  # AISimulate 0.04040 (kvreplay 0.05051 before)
    assert summary["duration_ms"] == 35210.0  # AISimulate 35,210


def test_the_spec_example_resumes_a_request_sharing_23700_tokens_at_23040(tmp_path):
    """"With block_size: 1536 and prefix_match_unit: 128, a cold 24,300-token prompt keeps snapshots at 23,040
    and 24,192 tokens.  A later request sharing 23,700 tokens resumes at 23,040."

    B shares A's first 185 units (23,680 tokens; its 186th unit, 23,680-23,808, differs from the 23,700th token
    on); C shares 189 (24,192 tokens, 15 blocks and 9 units of the 16th).  A's snapshots are its state (2 blocks,
    3,072 bytes) at both: 24,192 is inside block 16 but short of the prompt's end, so it takes no block for that
    block's first 1,152 tokens when stored (AISimulate's count, facts section 62; only a snapshot at the prompt's
    end does); when A completes, its partial block 16 (23,040-24,301) keeps them and joins that snapshot (3 blocks,
    4,608 bytes; facts section 77).  B resumes at 23,040 and C at 24,192 (as AISimulate, section 77); B stores
    only its own 24,192 (its 23,040 is A's), which its partial block joins in the same way, C none (its 23,040
    and 24,192 are A's)."""
    rows = [trace_row(0, 24_300, 2, A_IDS, 128),
            trace_row(100, 24_300, 2, A_IDS[:185] + list(range(1000, 1005)), 128),
            trace_row(200, 24_300, 2, A_IDS[:189] + [2000], 128)]
    single, records = replay(tmp_path, rows, config(**SPEC))
    assert resumed(records) == [[0], [23_040], [24_192]]
    # prefill passes of 10 ms: A 0-23,040-24,192-24,300, B 23,040-24,192-24,300, C 24,192-24,300
    assert [r["ttft_ms"] for r in records] == [30.0, 20.0, 10.0]
    assert [r["reused_input_tokens"] for r in records] == [0, 23_040, 24_192]
    snapshots = single.ranks()[0].snapshots
    stored = sorted((position, len(blocks) * 1536) for position, _, blocks in snapshots.stored.values())
    assert stored == [(23_040, 3_072), (24_192, 4_608), (24_192, 4_608)]
    section = json.loads(json.dumps(summary_sections(single)["state_cache"]))["aggregated"]  # (as written)
    assert section == {
        "block_size": 1536, "prefix_match_unit": 128, "bytes_per_request": 3000, "state_blocks_per_request": 2,
        "allocated_bytes_per_request": 3072, "snapshot_rule": "prompt_ends", "snapshots_stored": 3,
        "snapshots_resident": 3, "snapshots_evicted": 0, "snapshots_skipped": 0, "resumes": 2,
        "tokens_resumed": 23_040 + 24_192, "resumed_from": {"23040": 1, "24192": 1}}


def test_a_request_resumes_before_its_last_known_token(tmp_path):
    """The same 24,300 tokens again: the snapshot at 24,192 is before the last token (24,299) and is used; a
    prompt of exactly 24,192 tokens cannot resume at 24,192 (its last token is recomputed) and takes 23,040."""
    rows = [trace_row(0, 24_300, 2, A_IDS, 128), trace_row(100, 24_300, 2, A_IDS, 128),
            trace_row(200, 24_192, 2, A_IDS[:189], 128)]
    _, records = replay(tmp_path, rows, config(**SPEC))
    assert resumed(records) == [[0], [24_192], [23_040]]


def test_output_positions_are_not_resume_points(tmp_path):
    """Two turns of a session: 1,000 new tokens then 700 output tokens, whose 1,536 boundary is reached while
    decoding.  Turn 1 (2,700 tokens, sharing 1,700) resumes at 896, turn 0's last unit boundary, not at 1,536."""
    text = config(**SPEC).replace("""traffic:
  source: {type: trace, paths: [trace.jsonl], block_size: 128}
  load: {type: trace_timestamps}""", """traffic:
  source: {type: synthetic-session, new_input_tokens_per_turn: 1000, output_tokens_per_turn: 700,
           session: {turns: 2}}
  load: {type: concurrency, concurrency: 1}
  stop: {sessions: 1}""")
    _, records = replay(tmp_path, [], text)
    assert [r["input_length"] for r in records] == [1000, 2700]
    assert resumed(records) == [[0], [896]]


# ============================================================================================ snapshots cost G1

# The spec's geometry: eight 1,024-byte blocks of 64 tokens (16 B per token), a 1,500-byte state in two.
SMALL = dict(block=64, unit=64, state_bytes=1500, bytes_per_token=16)
# A (ids 1-3, 130 tokens) keeps a snapshot at 128; B (ids 7-9) arrives after A is done; C shares A's 128.
EVICTION_ROWS = [trace_row(0, 130, 1, [1, 2, 3], 64), trace_row(20, 130, 1, [7, 8, 9], 64),
                 trace_row(40, 130, 1, [1, 2, 4], 64)]


def test_a_snapshot_is_evicted_like_a_block_and_token_kv_without_one_is_not_reused(tmp_path):
    """A's first pass ends at 128, where its state (2 blocks) becomes its snapshot; its second pass computes into 2
    fresh state blocks and holds the snapshot's until it ends at 20 ms, when both A and the pass let go: the
    snapshot is then a free cached block, evicted in LRU order like A's token blocks.  B (20 ms) evicts it with
    its allocations.  C still finds A's first full block cached, but with no snapshot its state cannot be
    restored: it computes from 0.  Stored: A's, B's, C's; B's is evicted by C's allocations too."""
    single, records = replay(tmp_path, EVICTION_ROWS, config(g1_blocks=8, **SMALL))
    assert resumed(records) == [[0], [0], [0]]
    assert [r["reused_input_tokens"] for r in records] == [0, 0, 0]
    section = summary_sections(single)["state_cache"]["aggregated"]
    assert (section["snapshots_stored"], section["snapshots_evicted"], section["snapshots_resident"],
            section["resumes"]) == (3, 2, 1, 0)
    assert (section["state_blocks_per_request"], section["allocated_bytes_per_request"]) == (2, 2048)


def test_a_bigger_g1_keeps_the_snapshot(tmp_path):
    """With 16 blocks B takes never-used blocks only: C resumes at 128 from A's snapshot (one prefill pass, where
    A and B took two; it holds the snapshot's blocks through it) and stores none."""
    single, records = replay(tmp_path, EVICTION_ROWS, config(g1_blocks=16, **SMALL))
    assert resumed(records) == [[0], [0], [128]]
    assert [r["ttft_ms"] for r in records] == [20.0, 20.0, 10.0]
    assert [r["reused_input_tokens"] for r in records] == [0, 0, 128]
    section = summary_sections(single)["state_cache"]["aggregated"]
    assert (section["snapshots_stored"], section["snapshots_evicted"], section["resumes"],
            section["tokens_resumed"]) == (2, 0, 1, 128)


def preempted_request_pool():
    """One rank's pool of 8 blocks of 64 tokens (every copy kept, as on vLLM ranks), unit 32, a state of 2 blocks,
    and R: a 100-token prompt (unit keys 11-14) admitted into blocks [0, 1] (tokens; block 0 full, cached under
    key 900) and [2, 3] (state), that ran 64-96 and stored its snapshot at 96 (inside block 1, short of its end:
    its state alone)."""
    from types import SimpleNamespace
    from kvreplay.runtime.tiers.g1 import BlockPool
    pool = BlockPool(8)
    pool.keep_copies()
    rank = SimpleNamespace(pool=pool, block_size=64)
    snapshots = StateSnapshots(SimpleNamespace(prefix_match_unit=32, snapshot_rule="prompt_ends",
                                               blocks_per_request=2))
    spec = SimpleNamespace(prompt_len=100, keys=lambda unit: [11, 12, 13, 14])
    request = SimpleNamespace(spec=spec, num_tokens=100, blocks=pool.allocate(4))
    pool.register_run([0], [900], 0, 1)
    snapshots.reached(rank, request, 64, 96)
    return rank, snapshots, request


@pytest.mark.parametrize("arrival, resumed_at, first_token", [(15, 64, 30.0), (35, 96, 45.0)])
def test_a_snapshot_inside_a_block_is_resumable_once_its_writer_has_computed_its_prompt(tmp_path, arrival,
                                                                                       resumed_at, first_token):
    """Block 64, unit 32, a state of 2.  W (100 tokens, units [1, 2, 3, 4]) runs 0-64, 64-96 and 96-100 (10 ms
    passes, first token at 30) and keeps snapshots at 64 (a block boundary) and 96 (inside block 1, short of its
    end: no block of its own).  R (128 tokens, W's first three units and its own) arriving at 15 is admitted at 20,
    while W computes 96-100: W's 96 snapshot is not resumable yet (its first tokens are in W's partial block, which
    W still writes), so R resumes at 64 and runs 64-128 (reuse 64, first token at 30); arriving at 35, after W
    completed and its partial block joined the snapshot, R resumes at 96 and runs 96-128 (first token at 45).
    AISimulate: the same admissions, reuse and first tokens (facts section 77; kvreplay resumed at 96 in both)."""
    rows = [trace_row(0, 100, 1, [1, 2, 3, 4], 32), trace_row(arrival, 128, 1, [1, 2, 3, 9], 32)]
    _, records = replay(tmp_path, rows, config(block=64, unit=32, g1_blocks=64, state_bytes=1500, bytes_per_token=16))
    assert resumed(records) == [[0], [resumed_at]]
    assert [r["reused_input_tokens"] for r in records] == [0, resumed_at]
    assert [r["first_token_ms"] for r in records] == [30.0, first_token]


def test_a_preempted_requests_partial_block_joins_its_snapshot_and_is_evicted_in_its_order():
    """R is preempted after its 64-96 pass: its partial block 1 (tokens 64-96) holds the snapshot's first tokens
    and joins it (3 blocks); R's blocks go to the free queue's tail last first (3, 2, 1, 0), all cached, so its
    readmission resumes at 96 from [2, 3, 1] with block 0 as its hit.  Had an allocation of 5 taken the 4
    never-used blocks and then the queue's head (block 3), the snapshot is gone and nothing before it was stored:
    R computes from 0 (k13 at 30 blocks: AISimulate's waits and resumes follow only so, facts section 77)."""
    rank, snapshots, request = preempted_request_pool()
    snapshots.released(rank, request)
    rank.pool.release(request.blocks)
    assert list(rank.pool.free) == [3, 2, 1, 0]
    assert snapshots.resume(rank, request, [0]) == ([0], 96, [2, 3, 1])
    assert rank.pool.allocate(5) == [4, 5, 6, 7, 3]
    assert snapshots.resume(rank, request, [0]) == ([], 0, [])
    assert snapshots.evicted == 1


def test_a_snapshot_stored_again_over_a_partly_evicted_copy_is_whole():
    """A snapshot is its keys' content, not its blocks: after block 3 (the second state key's block) is evicted,
    R (readmitted from 0 into the keyless blocks another request gave back: tokens 4, 5, state 6, 7) stores its 96
    snapshot again; its first key is still cached in block 2 (the older copy, found first), its second now names
    block 7, so the snapshot is whole as [2, 7] (the old copy's survivor with the new block; R still holds its
    partial block 5, which joins when R lets it go; the old rule compared blocks and found it evicted at once,
    which made k13's preempted turns restart from 0 every 70 ms, facts section 77)."""
    rank, snapshots, request = preempted_request_pool()
    snapshots.released(rank, request)
    rank.pool.release(request.blocks)
    assert rank.pool.allocate(5) == [4, 5, 6, 7, 3]  # (another request's blocks: 3 lost its key)
    rank.pool.release([3, 7, 6, 5, 4])  # (... given back, keyless: to the head, 4 first)
    request.blocks = rank.pool.allocate(4)
    assert request.blocks == [4, 5, 6, 7] and snapshots.resume(rank, request, []) == ([], 0, [])
    snapshots.reached(rank, request, 64, 96)
    snapshots.reached(rank, request, 96, 100)  # (its prompt computed: a sub-block snapshot is resumable from now)
    assert snapshots.resume(rank, request, [0]) == ([0], 96, [2, 7])


def test_a_snapshot_inside_a_block_is_skipped_when_no_block_is_free(tmp_path):
    """Unit 32 in 64-token blocks: a 32-token prompt keeps its snapshot at 32, its end, inside block 0, which
    needs one block more than the state (the KV of the block's first 32 tokens).  With 3 blocks, A holds all of
    them (its token block and 2 state blocks) when its pass ends: the snapshot is skipped, and B (the same 32
    tokens) computes from 0; its own snapshot at 32 is skipped for the same reason."""
    rows = [trace_row(0, 32, 1, [1], 32), trace_row(50, 32, 1, [1], 32)]
    single, records = replay(tmp_path, rows, config(block=64, unit=32, g1_blocks=3, state_bytes=1500,
                                                    bytes_per_token=16))
    assert resumed(records) == [[0], [0]]
    section = summary_sections(single)["state_cache"]["aggregated"]
    assert (section["snapshots_stored"], section["snapshots_skipped"]) == (0, 2)


PROMPT_END_ROWS = [trace_row(0, 63, 1, [1, 2], 32), trace_row(50, 32, 1, [5], 32), trace_row(100, 63, 1, [1, 3], 32),
                   trace_row(150, 63, 1, [5, 4], 32)]


@pytest.mark.parametrize("g1_blocks, d_resumes", [(8, 0), (9, 32)])
def test_only_a_snapshot_at_the_prompts_end_takes_a_block_for_its_first_tokens(tmp_path, g1_blocks, d_resumes):
    """Unit 32 in 64-token blocks (1,024 bytes each), a state of 2.  A (63 tokens, units [1, 2]) keeps its
    snapshot at 32, inside block 0 but short of its end: its state alone, 2 blocks, when stored (AISimulate's
    count, facts section 62); it runs 0-32 and 32-63 (first token at 20 ms) into fresh state blocks, and when it
    completes its partial block 0 (63 tokens) joins the snapshot, a cached block freed in A's order (section 77):
    3 blocks.  B (32 tokens, unit [5]) keeps its at 32, its end: state and one block taken when stored, 3.  With 8
    blocks: A's token and state blocks 0-2, then fresh state 3-4; B's 5-7 (never used) and, for its snapshot, the
    head of the free queue: A's keyless fresh state (4).  C (63 tokens, units [1, 3]) resumes at A's snapshot: one
    10 ms pass from 32, reusing 32 tokens; it holds A's 3 blocks and takes 3 from the head (B's keyless token
    block 5, A's keyless 3, then 4, B's snapshot's block), so D (units [5, 4]) finds B's snapshot gone and
    computes from 0 and stores its own (state, then its partial block: 3).  With 9 blocks C takes the never-used
    block 8 instead of 4: D resumes at 32 from B's and stores none.  AISimulate:
    the same admissions and reuse on both sizes (0 / 0 / 32 / 0 and 0 / 0 / 32 / 32, section 77)."""
    single, records = replay(tmp_path, PROMPT_END_ROWS, config(block=64, unit=32, g1_blocks=g1_blocks,
                                                               state_bytes=1500, bytes_per_token=16))
    assert resumed(records) == [[0], [0], [32], [d_resumes]]
    assert [r["ttft_ms"] for r in records] == [20.0, 10.0, 10.0, 20.0 if not d_resumes else 10.0]
    assert [r["reused_input_tokens"] for r in records] == [0, 0, 32, d_resumes]
    snapshots = single.ranks()[0].snapshots
    resident = sorted((position, len(blocks) * 1024) for position, _, blocks in snapshots.stored.values())
    assert resident == [(32, 3072), (32, 3072)]  # 8 blocks: A's and D's own (its partial block joined), 9: A's, B's


FIXED_BYTES_UNIT = """
engine:
  model: Qwen/Qwen3-8B
  hardware: h100_sxm
  workers:
    aggregated:
      timing: {type: fixed, prefill_ms: 5.0, decode_ms: 1.0}
      kv_cache:
        block_size: 64
        bytes_per_token: 16
        capacity: {type: fixed, bytes: 8192}
        state_cache: {bytes_per_request: 1500}
        prefix_match_unit: 64
traffic:
  source: {type: synthetic, input_tokens: 100, output_tokens: 20}
  load: {type: concurrency, concurrency: 2}
  stop: {requests: 8}
"""


def test_a_snapshot_is_the_requests_own_state_and_its_next_pass_allocates_fresh_state(tmp_path):
    """The spec's eight blocks, 100 + 20-token requests two at a time (docs/reference-runs/state/fixed-bytes-unit):
    each prompt keeps one snapshot, at 64, and its chunks end there.  At 5 ms both states are snapshots; X's next
    chunk needs a token block and 2 fresh state blocks, 3 of the 2 free: Y is preempted, and X's allocation takes
    one of Y's freed state blocks (its blocks are freed last block first), so Y recomputes from 0 at 10 ms.  At
    15 ms Y, at 64 again, needs 3 with 1 free: preempted with its snapshot intact, it waits, since resuming holds
    the snapshot's 2 blocks besides the 3 it allocates, until X ends at 34 ms and resumes at 64.  AISimulate's
    requests.jsonl, same config: these admission histories, reuse 0.56, duration 232 ms, TTFT 31.62 ms."""
    path = tmp_path / "c.yaml"
    path.write_text(FIXED_BYTES_UNIT)
    out = tmp_path / "out"
    from .test_replay import replay as replay_config
    summary, records = replay_config(path, out)
    histories = sorted([(a["at_ms"], a["reused_input_tokens"]) for a in r["admission_history"]] for r in records)
    assert histories == sorted([[(0.0, 0), (10.0, 0), (34.0, 64)], [(0.0, 0)]] + [
        [(t, 0), (t + 24.0, 64)] for t in (39.0, 68.0, 97.0, 126.0, 155.0, 184.0)])
    assert (summary["prefix_cache_reused_ratio"], summary["duration_ms"]) == (0.56, 232.0)
    assert summary["mean_ttft_ms"] == pytest.approx(31.625)


# ============================================================================================ DeepSeek V4

DSV4 = """
engine:
  model: deepseek-ai/DeepSeek-V4-Flash
  hardware: b200_sxm
  workers:
    aggregated:
      parallelism: {tensor: 4, moe_expert: 4}
      timing: {type: fixed, prefill_ms: 20.0, decode_ms: 10.0}
      kv_cache:
        capacity: {type: fixed, blocks: 5000}
        state_cache: {}
traffic:
  source: {type: synthetic-session, new_input_tokens_per_turn: 3000, output_tokens_per_turn: OUT, session: {turns: 4}}
  load: {type: concurrency, concurrency: 1}
  stop: {sessions: 1}
"""


@pytest.mark.parametrize("output, expected", [
    # 3,050 / 6,100 / 9,150 tokens per turn: only turn 2's first 8,192-token chunk ends on a 256 boundary
    (50, [[0], [0], [0], [8192]]),
    # 3,200 tokens: the decode pass reaching 3,072 leaves a snapshot; turn 1 (6,200 prompt) resumes there and
    # its passes end on no boundary before 6,400, so turn 2 also resumes at 3,072; turn 3 at 9,472 (decode)
    (200, [[0], [3072], [3072], [9472]]),
])
def test_deepseek_v4_resumes_where_a_pass_left_a_request_on_a_block_boundary(tmp_path, output, expected):
    """DeepSeek V4 (rule pass_ends, facts §24: AISimulate gives these positions): 256-token rows, 26 state rows
    per request and per snapshot."""
    single, records = replay(tmp_path, [], DSV4.replace("OUT", str(output)))
    assert resumed(records) == expected
    rank = single.ranks()[0]
    assert rank.state_blocks == 26
    assert summary_sections(single)["state_cache"]["aggregated"]["snapshot_rule"] == "pass_ends"


@pytest.mark.parametrize("overrides, rows", [((), 26), (("engine.nextn=1", "engine.nextn_accepted=0.7"), 30),
                                             (("engine.speculation.kind=ngram",
                                               "engine.speculation.num_speculative_tokens=1"), 30)])
def test_deepseek_v4_reserves_26_state_rows_30_with_one_draft_token(tmp_path, overrides, rows):
    """"a 26-row state for its sliding-window groups ... Speculative decoding (`nextn` or `speculation`) widens
    each sliding window by the draft tokens, so one draft token gives 30 rows": each rank's state, either kind."""
    text = DSV4.replace("OUT", "10").replace("      timing: {type: fixed, prefill_ms: 20.0, decode_ms: 10.0}\n", "")
    result = compile_bytes(text.encode(), str(tmp_path / "dsv4.yaml"), overrides)
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    replay_ = build(finish_plan(result.plan.to_dict(), tmp_path))
    assert [rank.state_blocks for rank in replay_.ranks()] == [rows]
    assert replay_.ranks()[0].snapshots.state_blocks == rows  # a snapshot is one state


# ============================================================================================ P/D

PD = """
engine:
  mode: disaggregated
  model: Qwen/Qwen3-8B
  hardware: h200_sxm
  kv_transfer: {bandwidth_gb_per_second: 0.25, bytes_per_token: 250000, timing_mode: full_prompt}
  workers:
    prefill:
      timing: {type: fixed, prefill_ms: 10, decode_ms: 1}
      kv_cache: {block_size: 8, prefix_match_unit: 4, bytes_per_token: 250000, capacity: {type: fixed, blocks: 64},
                 state_cache: {bytes_per_request: 1500000}}
    decode:
      timing: {type: fixed, prefill_ms: 10, decode_ms: 1}
      kv_cache: {block_size: 8, bytes_per_token: 250000, capacity: {type: fixed, blocks: 64},
                 state_cache: {bytes_per_request: 3000000}}
traffic:
  source: {type: trace, paths: [trace.jsonl], block_size: 4}
  load: {type: trace_timestamps}
"""


def test_pd_prefill_resumes_from_its_snapshots_and_decode_skips_resident_token_kv(tmp_path):
    """A: 14 tokens (ids 1-4) keeps prefill snapshots at 8 and 12.  B (ids 1-3, 5; 14 tokens) resumes its prefill
    at 12; its decode rank holds A's first block (8 tokens) and skips it, but the state (the prefill role's
    1,500,000 B = 6 ms) and the whole prompt (full_prompt: its 14 tokens, 14 ms, as AISimulate's
    `full_prompt_tokens`) still travel: B's prefill ends at 110 ms, the KV lands at 130 ms.  B stores no snapshot (its 8 is A's, its 12 it resumed
    from); the decode rank computes no prompt: it stores none either."""
    rows = [trace_row(0, 14, 2, [1, 2, 3, 4], 4), trace_row(100, 14, 2, [1, 2, 3, 5], 4)]
    single, records = replay(tmp_path, rows, PD)
    assert [r["reused_input_tokens"] for r in records] == [0, 12]
    assert [r["decode_cached_input_tokens"] for r in records] == [0, 8]
    assert [r["kv_transfer_tokens"] for r in records] == [14, 14]
    assert records[1]["prefill_done_ms"] == 110.0 and records[1]["decode_admit_ms"] == 130.0
    prefill, decode = single.ranks()
    assert (prefill.state_blocks, decode.state_blocks) == (1, 2)  # 2,000,000-byte blocks: each role its own state
    section = summary_sections(single)["state_cache"]
    assert (section["prefill"]["snapshots_stored"], section["prefill"]["resumed_from"]) == (2, {"12": 1})
    assert section["decode"]["snapshots_stored"] == 0


@pytest.mark.parametrize("decode_blocks, status", [(4, "completed"), (3, "rejected")])
def test_the_decode_worker_reserves_the_prompt_blocks_plus_one_state(tmp_path, decode_blocks, status):
    """State cache: "The decode worker reserves the prompt blocks plus one state when it accepts a request".  A
    14-token prompt (2 blocks of 8) and the decode role's 3,000,000-byte state (2 blocks of 2,000,000 B): a decode
    G1 of 4 blocks takes it (the prefill ends at 30 ms, 0-8-12-14; its 14 tokens of KV (full_prompt: the prompt's exact
    tokens) and the prefill role's 1,500,000-byte state travel 20 ms at 0.25 GB/s: admitted at 50 ms, last token at
    52); one of 3 never can."""
    text = PD.replace("kv_cache: {block_size: 8, bytes_per_token: 250000, capacity: {type: fixed, blocks: 64},\n"
                      "                 state_cache: {bytes_per_request: 3000000}}",
                      "kv_cache: {block_size: 8, bytes_per_token: 250000, capacity: {type: fixed, blocks: %d},\n"
                      "                 state_cache: {bytes_per_request: 3000000}}" % decode_blocks)
    assert text != PD
    single, (record,) = replay(tmp_path, [trace_row(0, 14, 2, [1, 2, 3, 4], 4)], text)
    assert record["terminal_status"] == status
    if status == "completed":
        assert (record["prefill_done_ms"], record["decode_admit_ms"], record["last_token_ms"]) == (30.0, 50.0, 52.0)


def test_deepseek_v4_under_mtp_keeps_the_boundaries_accepted_drafts_cross(tmp_path):
    """`nextn: 1` (30 state rows): a decode pass whose accepted draft crosses 3,072 still leaves a snapshot
    there, so every turn 2 resumes at 3,072; turn 1 does not, since speculation drops the last matched block
    (12 blocks of 3,200 tokens -> 11, and no snapshot at or before 2,816).  AISimulate: the same positions."""
    text = DSV4.replace("OUT", "200").replace("turns: 4", "turns: 3").replace(
        "      timing: {type: fixed, prefill_ms: 20.0, decode_ms: 10.0}\n", "").replace(
        "engine:\n", "engine:\n  nextn: 1\n  nextn_accepted: 0.7\n").replace("concurrency: 1", "concurrency: 2").replace(
        "sessions: 1", "sessions: 4")
    single, records = replay(tmp_path, [], text)
    by_turn = {}
    for record in records:
        by_turn.setdefault(record["turn_index"], set()).update(resumed([record])[0])
    assert by_turn == {0: {0}, 1: {0}, 2: {3072}}
    assert single.ranks()[0].state_blocks == 30


# ============================================================================================ chunks and rules

SESSION = """traffic:
  source: {type: synthetic-session, new_input_tokens_per_turn: 1000, output_tokens_per_turn: 100,
           session: {turns: 3}}
  load: {type: concurrency, concurrency: 1}
  stop: {sessions: 1}
"""


def session_config(**geometry) -> str:
    text = config(g1_blocks=400, state_bytes=1500, bytes_per_token=16, **geometry)
    return text[:text.index("traffic:")] + SESSION


@pytest.mark.parametrize("unit, passes, resumes", [
    # 1,000 / 2,100 / 3,200 tokens: chunks end at the next block boundary (from a resume inside a block), the last
    # full block boundary before the last token and the last unit boundary, each a 10 ms prefill pass
    (64, [2, 2, 2], [0, 960, 2048]),  # 0-960-1000; 960-2048-2100; 2048-3136-3200
    (16, [3, 4, 3], [0, 992, 2096]),  # 0-960-992-1000; 992-1024-2048-2096-2100; 2096-2112-3136-3200
])
def test_align_mode_prefill_chunks_end_where_snapshots_are_kept(tmp_path, unit, passes, resumes):
    """vLLM align mode (AISimulate with `prefix_match_unit`, facts §24: the same TTFTs): 64-token blocks."""
    _, records = replay(tmp_path, [], session_config(block=64, unit=unit))
    assert [r["input_length"] for r in records] == [1000, 2100, 3200]
    assert [r["ttft_ms"] for r in records] == [10.0 * n for n in passes]
    assert resumed(records) == [[r] for r in resumes]


def test_an_explicit_state_without_a_unit_is_a_plain_reservation(tmp_path):
    """`bytes_per_request` without `prefix_match_unit` (AISimulate: the same): reuse resumes after the last
    whole block shared, the previous turn's output included (1,088 of 1,100 shared; 2,176 of 2,200), and a
    prompt is one chunk (TTFT one 10 ms pass)."""
    single, records = replay(tmp_path, [], session_config(block=64, unit=64, set_unit=False))
    assert [r["reused_input_tokens"] for r in records] == [0, 1088, 2176]
    assert [r["ttft_ms"] for r in records] == [10.0, 10.0, 10.0]
    assert summary_sections(single)["state_cache"]["aggregated"]["snapshot_rule"] == "whole_blocks"


KIMI = """
engine:
  model: moonshotai/Kimi-K3
  hardware: b200_sxm
  kvcache_quant_mode: fp8
  workers:
    aggregated:
      parallelism: {tensor: 8, moe_expert: 8}
      kv_cache: {block_size: 128, capacity: {type: fixed, blocks: 400}, state_cache: {}UNIT}
traffic:
  source: {type: synthetic-session, new_input_tokens_per_turn: 4096, output_tokens_per_turn: 16, session: {turns: 2}}
  load: {type: concurrency, concurrency: 1}
  stop: {sessions: 1}
"""


@pytest.mark.parametrize("unit, reused, rule", [(", prefix_match_unit: 128", [0, 4096], "prompt_ends"),
                                                ("", [0, 3072], "prompt_ends")])
def test_kimi_k3_resumes_at_its_units_snapshot(tmp_path, unit, reused, rule):
    """Kimi K3 (1,536-token blocks, 3 state blocks): with `prefix_match_unit: 128` turn 1 resumes at 4,096, turn
    0's last unit boundary; unset, the unit is the block (the spec's "Unset (`block_size`)"), so turn 0 (4,096
    tokens) keeps one snapshot at 3,072, its last full block, and turn 1 resumes there.  AISimulate reuses
    nothing without the unit (vLLM's default mamba cache mode); the spec wins (facts §24)."""
    single, records = replay(tmp_path, [], KIMI.replace("UNIT", unit))
    assert [r["reused_input_tokens"] for r in records] == reused
    section = summary_sections(single)["state_cache"]["aggregated"]
    assert (section["snapshot_rule"], section["block_size"], section["state_blocks_per_request"]) == (rule, 1536, 3)


def test_a_decode_that_ends_on_a_block_boundary_allocates_fresh_state(tmp_path):
    """docs/reference-runs/state/explicit-sessions-unit-g1-200 (200 blocks of 64, unit 64, 4 sessions at a time):
    at 545 ms three 3,200-token turns resume at 2,048 and session 7's 2,100-token turn at 960.  At 555 ms the three
    reach 3,200, a block boundary: each needs a token block and 2 fresh state blocks, and scheduled one after the
    other (each frees the state its last pass read just before it allocates) the second one preempts session 7,
    which recomputes from 0 at 556 ms; at 629 ms their decodes reach 3,264, another boundary with no snapshot,
    and preempt it again (readmitted at 630 ms, 63 tokens of output known).  It is recomputed as one prompt of
    2,163 tokens (0-2,112-2,163: two passes, its 2,048 snapshot taken on the way), decodes to 2,176 and is
    preempted a third time at 655 ms; its cached blocks and snapshot are now kept copies (the recompute's), so it
    waits for them (5 new blocks + 32 cached + 2 snapshot blocks > 38 free) until the three finish at 674 ms and
    resumes at 2,048 (2,048-2,176-2,177).  AISimulate's requests.jsonl: every admission and time the same."""
    path = tmp_path / "c.yaml"
    path.write_text((ROOT / "docs/reference-runs/state/explicit-sessions-unit-g1-200.yaml").read_text())
    from .test_replay import replay as replay_config
    summary, records = replay_config(path, tmp_path / "out")
    turn = next(r for r in records if r["input_length"] == 2100 and r["arrival_time_ms"] == 545.0)
    assert [(a["at_ms"], a["reused_input_tokens"]) for a in turn["admission_history"]] == [
        (545.0, 960), (556.0, 0), (630.0, 0), (674.0, 2048)]
    assert turn["last_token_ms"] == 702.0
    assert summary["duration_ms"] == 811.0  # AISimulate 811.0
    assert round(summary["prefix_cache_reused_ratio"], 5) == 0.45841  # AISimulate 0.45841


def test_kimi_k3_with_native_mtp_resumes_where_it_does_without(tmp_path):
    """Kimi K3 with `nextn: 1` (1,536-token blocks and unit: speculation needs whole-block matching): align mode
    resumes at a snapshot, so no matched block is dropped for the drafter as without a state cache; turn 1
    (8,208 tokens) resumes at 3,072 and turn 2 (12,320) at 7,680, the positions of a run without speculation,
    with 3 state blocks either way.  AISimulate (reference-runs/state/kimi-k3-nextn): the same resumes and state
    blocks; kvreplay resumed at 0 and 3,072 before (the last hit dropped)."""
    text = KIMI.replace("UNIT", ", prefix_match_unit: 1536").replace("block_size: 128", "block_size: 1536").replace(
        "turns: 2", "turns: 3").replace("kvcache_quant_mode: fp8\n", "kvcache_quant_mode: fp8\n  nextn: 1\n  nextn_accepted: 0.8\n")
    single, records = replay(tmp_path, [], text)
    assert [r["reused_input_tokens"] for r in sorted(records, key=lambda r: r["turn_index"])] == [0, 3072, 7680]
    section = summary_sections(single)["state_cache"]["aggregated"]
    assert (section["block_size"], section["state_blocks_per_request"], section["resumed_from"]) == (
        1536, 3, {"3072": 1, "7680": 1})


def test_deepseek_v4_frees_the_state_a_boundary_replaces_at_once(tmp_path):
    """docs/reference-runs/state/dsv4-sessions-fixed-500 (500 rows of 256 tokens, 26 state rows, 8 sessions at a
    time, 3,000 + 200 tokens a turn): at 11,530 ms session 8's last turn reaches 9,472, a block boundary, and needs
    a token block and 26 fresh state rows with 8 free, so session 14's turn (37 + 26 rows) is preempted.  The state
    the boundary replaces is a snapshot and, unlike align mode's, is not held through the next pass: 8 + 63 - 27 +
    26 = 70 free.  At 11,540 ms session 9's turn does the same (70 - 27 + 26 = 69) and session 14's turn, 9,466
    tokens known (37 + 26 = 63 rows), is readmitted; holding the replaced state it waited to 11,570 ms (43 free).
    AISimulate's requests.jsonl: every admission and time the same (facts §54)."""
    path = tmp_path / "c.yaml"
    path.write_text((ROOT / "docs/reference-runs/state/dsv4-sessions-fixed-500.yaml").read_text())
    from .test_replay import replay as replay_config
    summary, records = replay_config(path, tmp_path / "out")
    turn = next(r for r in records if r["session_id"].endswith("14") and r["turn_index"] == 2)
    assert [(a["at_ms"], a["reused_input_tokens"]) for a in turn["admission_history"]] == [
        (10820.0, 0), (11540.0, 0), (11580.0, 0), (11650.0, 0), (12900.0, 9472)]
    assert turn["last_token_ms"] == 14210.0
    assert summary["duration_ms"] == 14960.0  # AISimulate 14,960 (14,920 while the replaced state was held)
    assert round(summary["prefix_cache_reused_ratio"], 5) == 0.09376  # AISimulate 0.09376
    assert summary["preemptions"] == 4


def test_recommend_rejects_a_state_cache():
    """The State cache section's "Rejected: `recommend`": a recommend run of the spec's state fragment is refused by
    RECOMMEND-REJECTED (the other rejections, G2/G3 and sub-block units with speculation, are negative-corpus files:
    STATE-OFFLOAD, STATE-SPECULATION-SUB-BLOCK)."""
    from .support import codes, compile_yaml
    text = config(block=64, unit=64, g1_blocks=8, state_bytes=1500, bytes_per_token=16).replace(
        "trace.jsonl", "t.jsonl") + "recommend:\n  search:\n    engine.workers.aggregated.kv_cache.block_size: [64]\n"
    assert "RECOMMEND-REJECTED" in codes(compile_yaml(text))
    assert "RECOMMEND-REJECTED" not in codes(compile_yaml(text.replace("        state_cache: {bytes_per_request: 1500}\n",
                                                                       "").replace("        prefix_match_unit: 64\n", "")))


def test_deepseek_v4_lets_a_resumed_snapshot_go_once_its_state_is_allocated(tmp_path):
    """The same config with 450 rows: at 6,440 ms session 0's last turn ends (130 rows free) and session 6's
    preempted turn resumes at 9,472 from its own snapshot: 37 cached rows, 1 new token row and 26 fresh state rows.
    Held through the first pass, the snapshot's 26 rows left 130 - 37 - 26 - 27 = 40 free, so session 7's 9,400-
    token turn (37 + 26 rows) waited to 6,450 ms; DeepSeek V4 holds them only while the admission allocates, so 66
    are free and both start at 6,440.  AISimulate's requests.jsonl: every admission and time the same."""
    path = tmp_path / "c.yaml"
    path.write_text((ROOT / "docs/reference-runs/state/dsv4-sessions-fixed-500.yaml").read_text())
    from .test_replay import replay as replay_config
    summary, records = replay_config(path, tmp_path / "out",
                                     overrides=("engine.workers.aggregated.kv_cache.capacity.blocks=450",))
    turns = {r["session_id"][-1]: r for r in records if r["turn_index"] == 2 and r["session_id"][-1] in "67"}
    assert [(a["at_ms"], a["reused_input_tokens"]) for a in turns["6"]["admission_history"]][-1] == (6440.0, 9472)
    assert [(a["at_ms"], a["reused_input_tokens"]) for a in turns["7"]["admission_history"]] == [(6440.0, 0)]
    assert (turns["6"]["last_token_ms"], turns["7"]["last_token_ms"]) == (7830.0, 8590.0)
    assert summary["duration_ms"] == 15010.0  # AISimulate 15,010
    assert round(summary["prefix_cache_reused_ratio"], 5) == 0.0843  # AISimulate 0.08430


def test_deepseek_v4_keeps_a_recomputes_snapshot_only_where_its_chunk_ends():
    """`pass_ends`: a prefill chunk leaves a snapshot only at its end, on a block boundary; decode passes leave one
    at every boundary they cross.  A recompute of a preempted turn (6,600 prompt tokens, 58 of output known) runs
    0-6,658 in one chunk: its state is at 6,658, so it leaves none at 6,656 (it did, as if decoded there)."""
    ends = StateSnapshots.pass_end_positions
    assert list(ends(6600, 256, 0, 6658)) == []  # the recompute's chunk, past the prompt
    assert list(ends(6600, 256, 0, 6656)) == [6656]  # a chunk ending on a boundary
    assert list(ends(9400, 256, 8192, 9400)) == []  # a prompt's last chunk
    assert list(ends(9400, 256, 9471, 9472)) == [9472]  # a decode reaching a boundary
    assert list(ends(9400, 256, 9470, 9730)) == [9472, 9728]  # (accepted drafts: every boundary crossed)


def test_a_held_out_deepseek_v4_run_under_preemption_agrees_with_aisimulate(tmp_path):
    """docs/reference-runs/state/heldout-dsv4-2000-g240 (240 rows, 4 sessions of 2,000 + 300 tokens a turn):
    session 7's third turn is preempted twice and recomputed from 0 at 22,100 and 22,140 ms (0-6,657, 0-6,658);
    with a snapshot at 6,656 taken from that chunk it owed fresh state at its next pass, was preempted a third time
    at 22,170 and resumed at 6,656 at 24,530.  AISimulate lets it run on: last token at 24,640, every request
    the same, reuse 0.04795, duration 40,040 ms, 4 preemptions."""
    path = tmp_path / "c.yaml"
    path.write_text((ROOT / "docs/reference-runs/state/heldout-dsv4-2000-g240.yaml").read_text())
    from .test_replay import replay as replay_config
    summary, records = replay_config(path, tmp_path / "out")
    turn = next(r for r in records if r["session_id"].endswith("07") and r["turn_index"] == 2)
    assert [(a["at_ms"], a["reused_input_tokens"]) for a in turn["admission_history"]] == [
        (21470.0, 0), (22100.0, 0), (22140.0, 0)]
    assert turn["last_token_ms"] == 24640.0
    assert (summary["duration_ms"], round(summary["prefix_cache_reused_ratio"], 5), summary["preemptions"]) == (
        40040.0, 0.04795, 4)
