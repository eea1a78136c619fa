"""The finished plan's records of agentic traffic: plays of dependent requests, as the traces pass parsed them.

An AgentX (Weka) play is a tree of requests: the agent's own requests, one after another, and the
requests of the subagents it starts; an agentic Mooncake play the request nodes joined by `wait_for`; a
Mooncake delta session its turns, each after the one before.  The traces pass flattens each play into
nodes that name the nodes they wait for, so the runtime schedules them without knowing the trace format.  Times are
integer nanoseconds after the load's speedup; hash ids are renumbered densely, per play when the
trace's `hash_id_scope` is `local` (equal ids in two plays are then different blocks).
"""
from __future__ import annotations

from dataclasses import dataclass

AGENTIC_FORMATS = ("weka", "agentic_mooncake")  # traces of plays, as AISimulate's agentic loads read them
PLAY_FORMATS = AGENTIC_FORMATS + ("mooncake-delta",)  # replayed as plays of dependent requests


@dataclass(frozen=True, slots=True)
class AgenticNode:
    name: str  # the request id the outputs report
    conversation: str  # the conversation (prefix lineage) the request belongs to
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    waits_for: tuple[int, ...]  # nodes of the same play that must complete first; () = released by the play's start
    delay_ns: int  # after the last of `waits_for` completes, or after the play's start
    authored_ns: int = 0  # its recorded start from the play's start: where a snapshot cuts the play


@dataclass(frozen=True, slots=True)
class AgenticPlay:
    name: str
    start_ns: int  # its authored start, from the corpus' first play
    nodes: tuple[AgenticNode, ...]


@dataclass(frozen=True, slots=True)
class AgenticSource:
    block_size: int  # tokens per hash id (the trace's own)
    plays: tuple[AgenticPlay, ...]
    lanes: int | None  # at most this many plays at once; None: each play at its authored start
    basis: str  # the nested timestamp basis used: absolute | relative
    warmup: bool = False  # `agentic_warmup`: each lane's preparation requests run first, outside the results
    input_format: str = "weka"  # the trace format the plays were read from
    snapshot_seed: int | None = None  # `agentic_snapshot.seed`: each initial lane starts at a sampled cut of its play
    profile: AgenticProfile | None = None  # `agentic_profile`: lanes keep taking plays until a deadline


@dataclass(frozen=True, slots=True)
class AgenticProfile:
    """`traffic.load.agentic_profile`, in ns: admission window, grace after it, and the idle caps."""
    duration_ns: int
    response_grace_ns: int
    cancel_drain_ns: int
    tree_idle_cap_ns: int
    global_idle_cap_ns: int
