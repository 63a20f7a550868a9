"""MixedLoader over the caches on disk: `MixedLoader.pretrain(cache_dir, split, p=..., T=..., ...)` and
`MixedLoader.sft(cache_dir, split, p=..., T=..., seed=..., ...)`.

Each opener says which caches it reads (layout.pretrain_dir / layout.sft_dir of every source with weight > 0
somewhere in `p`) and how it opens one; `mixing` is the rest of the loader's arguments (B, seed, and rank,
world_size, mode when given), passed on unchanged. A source that is not built is refused naming its folder
(sources.open_weighted). The class below is MixedLoader's base; use it through MixedLoader.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from niels_gpt import layout
from niels_gpt.chat_template import IGNORE_INDEX
from niels_gpt.training.schedule import Schedule
from niels_gpt.training.sources import open_weighted

if TYPE_CHECKING:
    from niels_gpt.training.loader import MixedLoader


class FromCaches:
    """The openers of MixedLoader (module docstring)."""

    @classmethod
    def pretrain(
        cls, cache_dir, split="train", *, p, T: int, device="cpu", tokenizer=None, resident: bool = False, **mixing
    ) -> MixedLoader:
        """Sources `{cache_dir}/pretrain/{name}/{split}` (PretrainTokenStreamDataset) for every name with
        weight > 0 in `p`; `resident=True`: their shards in the memory of `device`, batches made there."""
        from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset

        def open_source(root: Path):
            return PretrainTokenStreamDataset(root / split, T=T, device=device, tokenizer=tokenizer)

        loader = cls._from_caches(layout.pretrain_dir, cache_dir, open_source, p=p, **mixing)
        return loader.made_resident() if resident else loader

    @classmethod
    def sft(
        cls,
        cache_dir,
        split: str = "train",
        *,
        p: Mapping[str, float],
        T: int,
        seed: int,
        device: str = "cpu",
        tokenizer=None,
        packing: bool = False,
        ignore_index: int = IGNORE_INDEX,
        resident: bool = False,
        **mixing,
    ) -> MixedLoader:
        """Sources `{cache_dir}/sft/{name}` (SFTExampleDataset.from_cache_dir) for every name with weight > 0
        in `p`; `packing=True` packs every source (packing seed: `seed`). With packing, p is each
        source's share of rows, i.e. of tokens, no longer of examples. `resident=True`: the caches in the
        memory of `device`, batches made there."""
        from niels_gpt.sft.dataset import SFTExampleDataset

        options = dict(T=T, device=device, tokenizer=tokenizer, packing=packing, seed=seed, ignore_index=ignore_index)
        options["resident"] = resident

        def open_source(root: Path):
            return SFTExampleDataset.from_cache_dir(root, split, **options)

        return cls._from_caches(layout.sft_dir, cache_dir, open_source, p=p, seed=seed, **mixing)

    @classmethod
    def _from_caches(cls, source_dir, cache_dir, open_source, *, p, **settings) -> MixedLoader:
        """The loader over `open_source(source_dir(cache_dir, name))` for every source with weight > 0 somewhere."""
        schedule = Schedule.of(p).used()
        return cls(open_weighted(schedule, source_dir, cache_dir, open_source), p=schedule, **settings)
