"""(B, T) windows from a pretrain split's uint16 shards, memory-mapped: random, or every window once.

`PretrainTokenStreamDataset("cache/pretrain/fineweb_edu/train", T=1024, device="cpu")` maps every
`shard_*.bin` once (read-only np.memmap: a batch reads only the pages its windows touch, never a whole
shard). A window is T+1 consecutive tokens (x = first T, y = last T, so `y[:, :-1] == x[:, 1:]`);
it may span document boundaries (eot ids) but never shards.

Sampling, so that every window start in the split is equally likely: a shard with n tokens has
n - T valid starts (shards with fewer than T+1 tokens are skipped), and the valid starts of all
shards are numbered one after the other. One draw from the caller's torch.Generator:
  torch.randint(0, total valid starts, (B,))  -> the window of each row; its shard and start follow
  (np.searchsorted over the shards' cumulative start counts). That is exactly "pick a shard in
  proportion to its number of windows, then a uniform start in it", with no modulo bias.
Rows are gathered with one vectorized numpy index per shard of a sliding-window view of its map,
and x and y are cut from them and converted to int64 in one numpy cast (niels_gpt.token_windows).

Epoch mode (MixedLoader(mode="epoch")) reads the dataset as a sequence of items instead:
`len(ds)` windows of T+1 tokens at stride T that tile each usable shard (token_windows.StrideTiling;
`epoch_dropped_tokens` counts the tokens in no window: each shard's tail shorter than T+1, and shards
shorter than T+1), and `ds.rows(ids)` returns the (x, y) numpy int64 arrays of windows `ids`.
`resident=True` copies the usable shards into the memory of `device` once (refused with one message
when they do not fit) and makes every batch there, the same rows (niels_gpt.training.resident).
`identity` names the data for a resumed loader's check: a digest of the shard list of meta.json
(file, tokens, sha256 of every shard), or of the shard names and sizes when there is no meta.json.

The split's files are those its meta.json lists (niels_gpt.shard_list: a parted source's manifest lists its
parts' shards, so `.../fineweb_edu/train` is read even though no such folder exists, with the eot that ends
a budget-cut document at a part boundary applied); a window never spans two files.
Guards: the parent directory's meta.json (when present) must say `built: true`, every file it lists must be
there with its listed size and no unlisted shard beside them, and no part of a manifest may have changed since
the merge; given a tokenizer, the cache's `tokenizer_sha256` must equal the tokenizer's. Several
sources are mixed by `niels_gpt.cache.loader.MixedLoader`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from niels_gpt.hashing import sha256_json
from niels_gpt.layout import META
from niels_gpt.meta import is_built, read_meta
from niels_gpt.shard_list import Shard, manifest_problems, split_shards, unlisted_shards
from niels_gpt.to_device import to_device
from niels_gpt.token_files import open_tokens
from niels_gpt.token_windows import StrideTiling, gather_rows, split_xy


def _check_meta(shards_dir: Path, tokenizer) -> dict | None:
    meta_path = shards_dir.parent / META
    if not meta_path.exists():
        if tokenizer is not None:
            raise ValueError(
                f"{shards_dir}: no {meta_path.name} in {shards_dir.parent}, so the tokenizer sha256 cannot be "
                "checked; rebuild the cache (its meta.json is written last)"
            )
        return None
    meta = read_meta(str(meta_path))
    if not is_built(meta):
        raise ValueError(
            f"{shards_dir.parent}: this pretrain cache was not built ({meta.get('reason', 'no reason given')}); "
            "enable the source and rebuild it"
        )
    if tokenizer is not None and meta.get("tokenizer_sha256") != tokenizer.sha256:
        raise ValueError(
            f"{shards_dir.parent}: cache built with tokenizer sha256 {meta.get('tokenizer_sha256')}, but the "
            f"tokenizer in use ({getattr(tokenizer, 'model_path', 'tokenizer')}) has sha256 {tokenizer.sha256}; "
            "rebuild the cache with this tokenizer"
        )
    return meta


def _check_files(shards_dir: Path, shards: list[Shard], meta: dict | None) -> None:
    """The files meta.json lists are there with the listed sizes, none is unlisted, and no part of a
    manifest changed since the merge; else one error naming what differs."""
    if meta is None:
        return
    source_dir, split = shards_dir.parent, shards_dir.name
    stale = manifest_problems(source_dir, meta)
    if stale:
        raise ValueError(f"{source_dir}/{META} is stale: {'; '.join(stale)}")
    want = [(s.name, s.tokens) for s in shards]
    have = [(s.name, s.path.stat().st_size // 2 if s.path.is_file() else None) for s in shards]
    have += [(name, None) for name in unlisted_shards(source_dir, split, shards)]
    if want != have:
        raise ValueError(
            f"{shards_dir}: shards on disk {have} do not match {source_dir / META} {want}; "
            "the cache is stale or damaged - rebuild it"
        )


class PretrainTokenStreamDataset:
    """T-token windows (x, y) over every shard of one split: uniformly random, or as stride-T items."""

    def __init__(
        self,
        shards_dir: str | os.PathLike,
        *,
        T: int,
        device: str | torch.device = "cpu",
        tokenizer=None,
        resident: bool = False,
    ):
        if not isinstance(T, int) or T < 1:
            raise ValueError(f"T must be a positive int, got {T!r}")
        self.shards_dir = Path(shards_dir)
        self.T = T
        self.device = torch.device(device)
        self.meta = _check_meta(self.shards_dir, tokenizer)
        # the split's files as meta.json lists them (a merge's manifest: the parts' shards), else the folder's
        self.shards = split_shards(self.shards_dir.parent, self.shards_dir.name, self.meta or {})
        _check_files(self.shards_dir, self.shards, self.meta)
        self.shard_paths = [s.path for s in self.shards]
        on_purpose = ((self.meta or {}).get("empty_splits") or {}).get(self.shards_dir.name)
        if not self.shard_paths and on_purpose:
            raise ValueError(
                f"{self.shards_dir}: this split is empty on purpose ({on_purpose}, see "
                f"{self.shards_dir.parent}/meta.json); give its budget a value above 0 and rebuild to read it"
            )
        if not self.shard_paths and self.meta is not None:
            raise ValueError(
                f"{self.shards_dir}: this split of the cache holds 0 tokens (see {self.shards_dir.parent}/meta.json); "
                "raise its token budget or val_doc_prob, or give the source more data, and rebuild"
            )
        if not self.shard_paths:
            raise FileNotFoundError(
                f"{self.shards_dir}: no shard_*.bin files; build the cache first "
                "(`python -m niels_gpt.cache.cli build-pretrain --source ...` or `snakemake -j4 cache/all`)"
            )
        self.maps = [open_tokens(s) for s in self.shards]  # persistent read-only memmaps (end_eot applied)
        self.shard_tokens = [len(m) for m in self.maps]
        self.n_tokens = sum(self.shard_tokens)
        usable = [i for i, n in enumerate(self.shard_tokens) if n >= T + 1]
        if not usable:
            longest = max(range(len(self.maps)), key=lambda i: self.shard_tokens[i])
            raise ValueError(
                f"{self.shards_dir}: no shard holds T+1 = {T + 1:,} tokens (the longest, "
                f"{self.shards[longest].listed}, has {self.shard_tokens[longest]:,}); lower T or build more tokens"
            )
        self.usable_shards = usable
        starts = [self.shard_tokens[i] - T for i in usable]
        self.num_windows = sum(starts)
        self._n_starts = np.array(starts, dtype=np.int64)
        self._first_window = np.cumsum(self._n_starts) - self._n_starts  # global number of each shard's start 0
        # (n - T, T + 1) views: row s is tokens[s : s + T + 1]; indexing reads only the rows asked for
        self._windows = [np.lib.stride_tricks.sliding_window_view(self.maps[i], T + 1) for i in usable]
        self._tiling = StrideTiling([self.shard_tokens[i] for i in usable], T)
        too_short = self.n_tokens - sum(self.shard_tokens[i] for i in usable)
        self.epoch_dropped_tokens = self._tiling.dropped_tokens + too_short  # tokens in no stride-T window
        self.resident = None  # resident=True: the usable shards in the device's memory (training/resident.py)
        if resident:
            from niels_gpt.training.resident import ResidentWindows

            what = str(self.shards_dir)
            self.resident = ResidentWindows(
                self._windows, T, self.device, what=what, draw=self.draw_windows, locate=self.locate
            )

    @property
    def window_views(self) -> list[np.ndarray]:
        """The (n - T, T+1) window view of every usable shard (what draw_windows and locate index)."""
        return self._windows

    def draw_windows(self, B: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(index into usable_shards, start token) of B windows; the two draws of the module docstring."""
        window = torch.randint(0, self.num_windows, (B,), generator=generator).numpy()
        shard = self._first_window.searchsorted(window, side="right") - 1  # the method: no numpy dispatch (~1.5 us)
        return shard, window - self._first_window[shard]

    def uniform_draw(self):
        """(n, locate): draw_windows is torch.randint(0, n, (B,)) mapped by locate(numbers) -> (shard, start) (what
        training/random_replay.py replays for many batches at once)."""

        def locate(window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            shard = self._first_window.searchsorted(window, side="right") - 1
            return shard, window - self._first_window[shard]

        return self.num_windows, locate

    def get_batch(self, *, B: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """x, y: int64 (B, T) on the dataset's device, contiguous, y[:, :-1] == x[:, 1:]."""
        if B < 1:
            raise ValueError(f"B must be >= 1, got {B}")
        where = self.draw_windows(B, generator)
        if self.resident is not None:
            return self.resident.rows(where)
        return to_device(split_xy(gather_rows(self._windows, *where)), self.device)

    # -- epoch mode: the stride-T windows as items ----------------------------------------------
    def __len__(self) -> int:
        """Stride-T windows of T+1 tokens over the usable shards (the items of an epoch)."""
        return self._tiling.num_windows

    def locate(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(index into usable_shards, start token) of stride-T windows `ids` (0..len-1)."""
        return self._tiling.locate(ids)

    def rows(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(x, y): C-contiguous int64 numpy arrays (len(ids), T) of stride-T windows `ids` (0..len-1)."""
        return split_xy(gather_rows(self._windows, *self.locate(ids)))

    @property
    def identity(self) -> str:
        """Digest of what this split holds: meta.json's shard list (with sha256s), else names and sizes."""
        listed = ((self.meta or {}).get("shards") or {}).get(self.shards_dir.name)
        if listed is None:
            listed = [[s.listed, n] for s, n in zip(self.shards, self.shard_tokens)]
        return sha256_json({"pretrain_shards": listed})

    def __repr__(self) -> str:
        return (
            f"PretrainTokenStreamDataset({str(self.shards_dir)!r}, T={self.T}, {self.n_tokens:,} tokens in "
            f"{len(self.maps)} shard(s), {self.num_windows:,} windows; epoch: {len(self):,} stride-T windows, "
            f"{self.epoch_dropped_tokens:,} tokens in none)"
        )
