"""TorchUniform (pretrain/uniform.py): bit-identical to torch.rand's float32 stream of a seeded CPU Generator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from niels_gpt.pretrain.uniform import TorchUniform

# 0 and small seeds, the default config seed, the 32-bit edge, seeds torch folds to 32 bits (above 2**32,
# negative, the 64-bit extremes)
SEEDS = [0, 1, 42, 2**32 - 1, 2**32 + 5, -1, -12345, 2**63 - 1, 2**64 - 1]


@pytest.mark.parametrize("seed", SEEDS)
def test_millions_of_draws_equal_torch_rand(seed):
    g, ours = torch.Generator().manual_seed(seed), TorchUniform(seed)
    for n in (1_000_000, 1, 255, 1_000_000):  # one stream, drawn in batches of any size
        want = torch.rand(n, generator=g).double().numpy()
        assert np.array_equal(ours.draw(n), want)


def test_one_draw_at_a_time_equals_one_batch():
    g, ours = torch.Generator().manual_seed(7), TorchUniform(7)
    singles = [torch.rand(1, generator=g).item() for _ in range(2_000)]
    assert ours.draw(2_000).tolist() == singles


def test_draws_are_float32_values_in_zero_one():
    draws = TorchUniform(3).draw(100_000)
    assert draws.dtype == np.float64
    assert np.array_equal(draws.astype(np.float32).astype(np.float64), draws)
    assert draws.min() >= 0.0 and draws.max() < 1.0
