"""The uniform draws of `torch.rand(n, generator=torch.Generator().manual_seed(seed))`, without torch.

torch's CPU generator is mt19937 seeded by MT's own `init_genrand` with the low 32 bits of the seed
(a negative seed counts as its 64-bit two's complement), and its float32 uniform sampler turns one
32-bit output per element, in order, into `(output & (2**24 - 1)) * 2**-24`. `TorchUniform` runs the
same generator in numpy (`numpy.random.MT19937`, whose state is set to init_genrand's) and applies the
same arithmetic, so its draws are bit-identical to torch's, batch after batch, however the draws are
grouped (tests/pretrain/test_uniform.py compares millions of draws over several seeds). It spares the
pretrain build importing torch (seconds and ~500 MiB in a fresh process) for one draw per document.
"""

from __future__ import annotations

import numpy as np

_MT_N = 624  # mt19937's state words
_MT_INIT_MULTIPLIER = 1812433253  # init_genrand's multiplier (Matsumoto & Nishimura)
_MASK32 = 0xFFFFFFFF
_FLOAT_BITS = 24  # float32's significand: torch keeps this many low bits of each 32-bit output


def init_genrand(seed: int) -> np.ndarray:
    """mt19937's 624-word state for `seed` as torch sets it: init_genrand(seed mod 2**32)."""
    state = [seed & _MASK32]
    for i in range(1, _MT_N):
        prev = state[-1]
        state.append((_MT_INIT_MULTIPLIER * (prev ^ (prev >> 30)) + i) & _MASK32)
    return np.array(state, dtype=np.uint32)


class TorchUniform:
    """A seeded stream of uniforms in [0, 1), equal to torch.rand's float32 draws under manual_seed(seed)."""

    def __init__(self, seed: int):
        self._mt = np.random.MT19937()
        # pos = 624: the whole state is regenerated before the first output, as torch's first draw does
        self._mt.state = {"bit_generator": "MT19937", "state": {"key": init_genrand(seed), "pos": _MT_N}}

    def state(self) -> dict:
        """The generator's position, JSON-able: `TorchUniform.at(seed, state)` continues from it."""
        st = self._mt.state["state"]
        return {"key": st["key"].tolist(), "pos": int(st["pos"])}

    @classmethod
    def at(cls, seed: int, state: dict) -> TorchUniform:
        g = cls(seed)
        g._mt.state = {
            "bit_generator": "MT19937",
            "state": {"key": np.array(state["key"], dtype=np.uint32), "pos": state["pos"]},
        }
        return g

    def draw(self, n: int) -> np.ndarray:
        """The next `n` draws as float64 (each exactly a float32 value: the routing compares it as torch's)."""
        bits = self._mt.random_raw(n) & ((1 << _FLOAT_BITS) - 1)
        return bits.astype(np.float64) * 2.0**-_FLOAT_BITS
