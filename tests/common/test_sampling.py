"""niels_gpt.sampling: the mixture contract every mixed batch relies on, and the derived seeds.

Other tests (byte batches, MixedLoader) check only that they call `draw_sources` in the documented
order; the shares, the sorted-name order and the refusals are tested here, once.
"""

from __future__ import annotations

import pytest
import torch

from niels_gpt.sampling import check_mixture, derive_seed, draw_sources, splitmix64

P = {"b": 0.75, "a": 0.05, "c": 0.20}


def test_draw_sources_names_are_sorted_and_shares_follow_p():
    names, idx = draw_sources(P, 40_000, torch.Generator().manual_seed(0))
    assert names == ["a", "b", "c"] and idx.dtype == torch.int64 and idx.shape == (40_000,)
    for k, name in enumerate(names):
        assert abs((idx == k).double().mean().item() - P[name]) < 0.01, name


def test_draw_sources_is_one_multinomial_and_ignores_dict_order():
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    _, a = draw_sources(P, 64, g1)
    _, b = draw_sources(dict(reversed(list(P.items()))), 64, g2)
    want = torch.multinomial(
        torch.tensor([0.05, 0.75, 0.20], dtype=torch.float64),
        64,
        replacement=True,
        generator=torch.Generator().manual_seed(5),
    )
    assert torch.equal(a, b) and torch.equal(a, want)
    assert torch.equal(g1.get_state(), g2.get_state())  # the same number of draws was consumed


@pytest.mark.parametrize(
    "p, match",
    [
        ({"a": 0.5, "b": 0.5}, r"sources missing from p: \['c'\]"),
        ({**P, "d": 0.0}, r"p names sources that are not available: \['d'\]"),
        ({"a": 0.2, "b": 0.7, "c": 0.2}, r"must sum to 1 \(within 1e-06\), got 1.0999"),
        ({"a": -0.1, "b": 0.9, "c": 0.2}, r"negative probabilities: \{'a': -0.1\}"),
    ],
)
def test_bad_mixtures_are_refused_with_what_is_wrong(p, match):
    with pytest.raises(ValueError, match=match):
        check_mixture(p, ("a", "b", "c"))


def test_check_mixture_returns_the_sampling_order():
    assert check_mixture(P, P) == ["a", "b", "c"]


def test_splitmix64_and_derive_seed_are_pinned():
    # splitmix64's published first two outputs from state 0; derived seeds are part of the resume contract
    assert splitmix64(0) == 0xE220A8397B1DCDAF and splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4
    assert [derive_seed(42, s, r) for s, r in [(0, 0), (1, 0), (0, 1), (10**6, 7)]] == [
        854689982,
        2145168321,
        854689983,
        1498644627,
    ]
    seeds = {derive_seed(42, s, r) for s in range(2_000) for r in range(4)}
    assert len(seeds) == 8_000 and max(seeds) < 2**32
