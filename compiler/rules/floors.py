"""Rules that refuse physical quantities too small to be meant: bandwidths, arrival rates and trace speedups.

The schema gives each field a finite range, but its lower end is 0 (or just above):
a bandwidth of 1e-300 GB/s passes it and makes one block copy take longer than a
float can hold (an OverflowError in the replay), and 1e-12 GB/s makes it take
sixty thousand years of virtual time.  Nothing real is that slow, so each kind
of quantity has a floor far below any device or workload (and far above where
the arithmetic breaks):

- a bandwidth (every `*bandwidth_gbps` and `bandwidth_gb_per_second`, GB/s): 0
  where the field means unlimited, else at least 1e-6 GB/s (1 kB/s, the speed
  of a 1990s modem: a 2 MB block in half an hour);
- an arrival rate (`requests_per_second`, `sessions_per_second`): at least 1e-6
  a second (one in 11.6 days);
- a trace's `speedup`: at least 1e-3 (a trace replayed a thousand times slower
  than it was recorded: its timestamps in nanoseconds still fit 64 bits for a
  trace of up to 290 years).
"""
from __future__ import annotations

from ..spec import Spec, walk_leaves
from .rule import Check, Rule

LINKS = "kv-cache-tiers.md: KV cache fields"  # (the floors are kvreplay's own: the spec gives the fields only)
TRAFFIC = "REFERENCE.md: traffic.stop / traffic.load"
MIN_BANDWIDTH_GBPS = 1e-6
MIN_RATE_PER_SECOND = 1e-6
MIN_SPEEDUP = 1e-3


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _below(floor: float, keys) -> Check:
    """A check blaming every number under `engine` or `traffic.load` whose key `keys` accepts and that is in
    (0, floor); (not the rest of `traffic`: a ReplaySpec's requests may be a million leaves)."""

    def check(spec: Spec):
        for section in ("/engine", "/traffic/load"):
            for pointer, value in walk_leaves(spec.get(section) or {}, section):
                if _number(value) and 0 < value < floor and keys(pointer.rsplit("/", 1)[-1]):
                    yield pointer

    return check


def _bandwidth(key: str) -> bool:
    return key.endswith("bandwidth_gbps") or key == "bandwidth_gb_per_second"


RULES = (
    Rule("LINK-BANDWIDTH-FLOOR", LINKS,
         f"a bandwidth above 0 and below {MIN_BANDWIDTH_GBPS:g} GB/s (1 kB/s) cannot be meant: one KV block would "
         "take hours to copy, and below that longer than the replay's clock can count",
         f"give the link's bandwidth in GB/s, at least {MIN_BANDWIDTH_GBPS:g} (0 where the field means unlimited)",
         _below(MIN_BANDWIDTH_GBPS, _bandwidth)),
    Rule("TRAFFIC-RATE-FLOOR", TRAFFIC,
         f"an arrival rate below {MIN_RATE_PER_SECOND:g} a second (one in 11.6 days) cannot be meant",
         f"give the rate in arrivals per second, at least {MIN_RATE_PER_SECOND:g}",
         _below(MIN_RATE_PER_SECOND, lambda key: key in ("requests_per_second", "sessions_per_second"))),
    Rule("TRAFFIC-SPEEDUP-FLOOR", TRAFFIC,
         f"a `speedup` below {MIN_SPEEDUP:g} (a trace replayed more than a thousand times slower than recorded) "
         "cannot be meant", f"give a speedup of at least {MIN_SPEEDUP:g} (1 replays the trace as recorded)",
         _below(MIN_SPEEDUP, lambda key: key == "speedup")),
)
