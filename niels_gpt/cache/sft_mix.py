"""Mixed SFT batches: each row's source drawn from a mixture, then an example from that source.

Contract (niels_gpt.sampling, shared with every mixed batch): `mix` names exactly the datasets
given, weights >= 0 summing to 1. One `draw_sources(mix, B, generator)` call picks every row's
source (sources in sorted-name order); then, in that order, each source fills its rows with one
`get_batch(B=rows, generator=generator)` from the same generator. Same generator state => same
batch. "primer" is an ordinary source name; the default mix comes from config (`sft.mix`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.sampling import check_mixture, draw_sources


def default_mix_sft() -> dict[str, float]:
    """The schema default of `sft.mix` ({"primer": 0.10, "oasst1": 0.70, "dolly15k": 0.20})."""
    from niels_gpt.config import schema_defaults

    return dict(schema_defaults()["sft"]["mix"])


class MixedSFTBatches:
    def __init__(self, datasets: Mapping[str, SFTExampleDataset], mix: Mapping[str, float] | None = None):
        mix = dict(default_mix_sft() if mix is None else mix)
        check_mixture(mix, datasets, what="sft.mix")
        self.datasets, self.mix = dict(datasets), mix
        Ts = {name: ds.T for name, ds in self.datasets.items()}
        if len(set(Ts.values())) > 1:
            raise ValueError(f"every SFT dataset of a mix needs the same T, got {Ts}")
        devices = {name: str(ds.device) for name, ds in self.datasets.items()}
        if len(set(devices.values())) > 1:
            raise ValueError(f"every SFT dataset of a mix needs the same device, got {devices}")
        empty = [name for name, ds in self.datasets.items() if mix[name] > 0 and len(ds) == 0]
        if empty:
            raise ValueError(f"sft.mix gives weight to {empty}, which have no example to sample at T={self.T}")
        shas = {name: (ds.meta or {}).get("tokenizer_sha256") for name, ds in self.datasets.items()}
        known = {s for s in shas.values() if s}
        if len(known) > 1:
            raise ValueError(f"SFT caches of one mix were built with different tokenizers (sha256 by source: {shas})")

    @property
    def T(self) -> int:
        return next(iter(self.datasets.values())).T

    @classmethod
    def from_config(cls, cfg: dict, split: str = "train", *, T: int | None = None, device: str = "cpu",
                    tokenizer=None) -> MixedSFTBatches:  # fmt: skip
        """Datasets from `{cache_dir}/sft/{source}` for every source of `cfg["sft"]["mix"]`; T defaults to sft.t_max."""
        T = cfg["sft"]["t_max"] if T is None else T
        mix = cfg["sft"]["mix"]
        datasets = {
            name: SFTExampleDataset.from_cache_dir(
                os.path.join(cfg["cache_dir"], "sft", name), split, T=T, device=device, tokenizer=tokenizer
            )
            for name in mix
        }
        return cls(datasets, mix)

    def get_batch(self, *, B: int, generator=None, return_sources: bool = False):
        """(x, y, y_masked), each (B, T) int64; with return_sources also the (B,) source index tensor
        and the list of source names it indexes."""
        import torch

        names, src = draw_sources(self.mix, B, generator)
        device = next(iter(self.datasets.values())).device
        x = torch.empty((B, self.T), dtype=torch.int64, device=device)
        y, ym = torch.empty_like(x), torch.empty_like(x)
        for k, name in enumerate(names):
            rows = (src == k).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            bx, by, bym = self.datasets[name].get_batch(B=rows.numel(), generator=generator)
            rows = rows.to(device)
            x[rows], y[rows], ym[rows] = bx, by, bym
        if return_sources:
            return x, y, ym, src, names
        return x, y, ym
