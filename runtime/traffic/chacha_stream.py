"""AISimulate's arrival draws: the uniform stream of Rust `rand`'s `StdRng::seed_from_u64(seed)`, in call order.

AISimulate (its native runtime, rand 0.9) times a Poisson load with one
`StdRng` seeded from the load's `seed`: ChaCha with 12 rounds, its 256-bit
key filled by `seed_from_u64` (a PCG32 step per 32-bit key word), nonce and
block counter starting at 0, the 16 words of each block read in order and two
words (low first) making a u64; a float in [0, 1) is its top 53 bits.  Each
gap is -ln(1 - u) / rate, the first request arriving at 0 (reference-facts
section 22: every arrival of a 200-request run agrees).  Counter-based
draws (rng.py) cannot give the same numbers, so the Poisson load reads this
stream instead; it is pure Python and byte-identical on every platform.
"""
from __future__ import annotations

import math

WORD = 0xFFFFFFFF
U64 = (1 << 64) - 1
ROUNDS = 12
SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"
PCG_MULTIPLIER = 6364136223846793005  # rand_core's seed_from_u64 constants
PCG_INCREMENT = 11634580027462260723


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & WORD


def _quarter(s: list[int], a: int, b: int, c: int, d: int) -> None:
    s[a] = (s[a] + s[b]) & WORD
    s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & WORD
    s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & WORD
    s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & WORD
    s[b] = _rotl(s[b] ^ s[c], 7)


def key_from_seed(seed: int) -> tuple[int, ...]:
    """The eight key words `seed_from_u64` derives from `seed` (PCG32, XSH-RR output)."""
    state = seed & U64
    words = []
    for _ in range(8):
        state = (state * PCG_MULTIPLIER + PCG_INCREMENT) & U64
        shifted = (((state >> 18) ^ state) >> 27) & WORD
        rotation = state >> 59
        words.append(((shifted >> rotation) | (shifted << ((32 - rotation) & 31))) & WORD)
    return tuple(words)


def block(key: tuple[int, ...], counter: int, nonce: tuple[int, int] = (0, 0)) -> list[int]:
    """The 16 output words of ChaCha12 block `counter` (64-bit counter; `StdRng` uses stream, i.e. nonce, 0)."""
    initial = [*SIGMA, *key, counter & WORD, (counter >> 32) & WORD, *nonce]
    s = initial[:]
    for _ in range(ROUNDS // 2):
        _quarter(s, 0, 4, 8, 12)
        _quarter(s, 1, 5, 9, 13)
        _quarter(s, 2, 6, 10, 14)
        _quarter(s, 3, 7, 11, 15)
        _quarter(s, 0, 5, 10, 15)
        _quarter(s, 1, 6, 11, 12)
        _quarter(s, 2, 7, 8, 13)
        _quarter(s, 3, 4, 9, 14)
    return [(x + y) & WORD for x, y in zip(s, initial)]


class UniformStream:
    """Floats in [0, 1), as `rng.random::<f64>()` of a `StdRng` seeded with `seed_from_u64(seed)` returns them."""

    def __init__(self, seed: int):
        self._key = key_from_seed(seed)
        self._counter = 0
        self._words: list[int] = []
        self._next = 0

    def _word(self) -> int:
        if self._next == len(self._words):
            self._words = block(self._key, self._counter)
            self._counter += 1
            self._next = 0
        word = self._words[self._next]
        self._next += 1
        return word

    def next_u64(self) -> int:
        low = self._word()
        return (self._word() << 32) | low

    def uniform(self) -> float:
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def exponential(self, rate: float) -> float:
        """The next gap of a Poisson process of `rate` events per unit (inverse transform, as AISimulate)."""
        return -math.log(1.0 - self.uniform()) / rate
