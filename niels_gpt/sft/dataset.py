"""SFTExampleDataset: memory-mapped SFT examples -> (x, y, y_masked) batches, padded or packed.

Reads one split of an SFT cache (writer.py): `{split}_tokens.bin` (uint16 LE, memory-mapped, never
read whole) and `{split}_idx.npy` (int64 start offsets). Special ids come from the sibling meta.json
unless given. Reading never changes the cache: packing is a way of reading it.

Per example: its kept tokens, at most T+1 of them in at most two segments of the example (windows.py:
`head` keeps the first T+1, `tail` the last, `prompt` the final assistant reply whole and cuts the
prompt side), computed for every example at init (`segments`, vectorized). The loss mask is computed
once at init on the whole file with `loss_mask_from_tokens` (reset at every example start), i.e. on
whole examples before they are cut, and gathered at the kept positions, so it equals the
`render_chat_sft` labels of the kept tokens. It costs one byte per token of RAM (a few MB for dolly or
oasst1). A row is T+1 slots; x = row[:-1], y = row[1:]; y_masked is y where the target is loss-active
and `ignore_index` (default -100, torch's; nanoGPT ignores -1) elsewhere.

Padded (the default): one example per row, padded with eot to T+1 (pad targets ignored); an item is
a kept example.
Packed (`packing=True`): whole examples side by side, best-fit decreasing into rows of T+1 slots
(packing.py; computed at init, a pure function of the cache, T and `seed`, which orders examples of
equal length), the rest of a row eot padding; an item is a packed row. Rows come with two more (B, T)
arrays: `segment_ids` (int32: 1..k = the k-th example of the row, 0 = padding) and `position_ids`
(int64: the position inside its example, restarting at 0 at each example and at the padding). The
target that crosses from one example into the next is ignored; every example's own targets are
exactly its padded row's. Give the model `training.attention.block_causal_mask(segment_ids)` so
that a token attends only to its own example, and the position ids. `fill` is the share of row slots
that hold a token, padded or packed.

Examples with no loss-active target among their kept tokens for this T are excluded at init (so no
batch row is ever entirely ignored); `num_excluded` counts them, `excluded` by reason
(windows.DROP_REASONS), and `cut` counts the kept examples that are cut, by reason
(windows.CUT_REASONS). A split built empty on purpose (meta `empty_splits`, e.g. val_frac 0) says so
when asked for a batch.

Sampling: one `torch.randint(len(self), (B,), generator=generator)` draw picks the B items (kept
examples, or packed rows), uniformly, with replacement; then one gather for all B rows. Epoch mode
(MixedLoader(mode="epoch")) reads the items in order instead: `len(ds)` of them, `ds.rows(ids)`;
`resident=True` copies the tokens, the mask and the rows' segments or pieces into the memory of `device` once
and makes every batch there, the same rows (niels_gpt.training.resident). `identity` names the data for a
resumed loader's check (meta.json's sha256s of this split's files,
the truncation, and the packing seed when packed).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from niels_gpt import layout
from niels_gpt.chat_template import IGNORE_INDEX, loss_mask_from_tokens
from niels_gpt.hashing import sha256_json
from niels_gpt.meta import is_built, read_meta
from niels_gpt.sft.packing import pack_examples, row_pieces, slot_map
from niels_gpt.sft.windows import (
    CUT_REASONS,
    DROP_REASONS,
    check_truncation,
    drop_codes,
    kept_segments,
    reason_counts,
    row_positions,
)
from niels_gpt.token_files import OFFSET_DTYPE, open_tokens


class SFTExampleDataset:
    def __init__(
        self,
        tokens_path: str | os.PathLike,
        idx_path: str | os.PathLike,
        *,
        T: int,
        device: str = "cpu",
        eot_id: int,
        truncation: str = "head",
        special_ids: dict[str, int] | None = None,
        tokenizer=None,
        packing: bool = False,
        seed: int = 0,
        ignore_index: int = IGNORE_INDEX,
        resident: bool = False,
    ):
        check_truncation(truncation)
        if T < 1:
            raise ValueError(f"T must be >= 1, got {T}")
        self.tokens_path, self.idx_path = str(tokens_path), str(idx_path)
        self.T, self.device, self.eot_id, self.truncation = T, device, int(eot_id), truncation
        self.seed, self.ignore_index = seed, int(ignore_index)
        self.meta = self._sibling_meta(tokenizer)
        self.special_ids = self._special_ids(special_ids, tokenizer)
        if self.special_ids["eot"] != self.eot_id:
            raise ValueError(
                f"eot_id={eot_id} but the special ids say eot={self.special_ids['eot']} ({self.tokens_path})"
            )
        self.tokens = open_tokens(self.tokens_path)
        n_tok = self.tokens.shape[0]
        starts = self._load_offsets(n_tok)
        lengths = np.diff(np.append(starts, n_tok))
        self.num_examples = len(starts)
        self.mask = loss_mask_from_tokens(self.tokens, self.special_ids, example_starts=starts)
        segments = kept_segments(self.mask, starts, lengths, T, truncation)
        dropped = drop_codes(self.mask, starts, lengths, segments)
        self.kept = np.flatnonzero(dropped == 0)  # example ids that can be sampled
        self.segments = segments.take(self.kept)  # the kept tokens of every sampleable example
        self.num_excluded = self.num_examples - len(self.kept)
        self.excluded = reason_counts(dropped, DROP_REASONS)
        self.cut = reason_counts(self.segments.cut, CUT_REASONS[truncation])
        kept_lengths = self.segments.len1 + self.segments.len2
        self.packed = pack_examples(kept_lengths, T + 1, seed) if packing else None
        self.pieces = row_pieces(self.packed, self.segments, T + 1) if packing else None
        self.fill = self._fill(kept_lengths)
        self.resident = None  # resident=True: tokens, mask and rows in the device's memory (training/resident.py)
        if resident:
            import torch

            from niels_gpt.training.resident import ResidentSFT

            self.resident = ResidentSFT(self, torch.device(device), what=self.tokens_path)

    # -- construction helpers ------------------------------------------------------------------
    @classmethod
    def from_cache_dir(
        cls,
        cache_dir,
        split: str = "train",
        *,
        T: int,
        device: str = "cpu",
        tokenizer=None,
        truncation: str | None = None,
        packing: bool = False,
        seed: int = 0,
        ignore_index: int = IGNORE_INDEX,
        resident: bool = False,
    ) -> SFTExampleDataset:
        """The `split` of the cache in `cache_dir` (e.g. "cache/sft/oasst1"); truncation from meta."""
        meta = read_meta(os.path.join(cache_dir, layout.META))
        if not is_built(meta):
            raise ValueError(
                f"{cache_dir}: this SFT cache was not built ({meta.get('reason', 'source disabled')}); "
                f"enable sources.{meta.get('source')}.enabled and rebuild, or leave it out of sft.mix"
            )
        if split not in layout.SPLITS:
            raise ValueError(f"split must be one of {layout.SPLITS}, got {split!r}")
        return cls(
            os.path.join(cache_dir, layout.sft_tokens_name(split)),
            os.path.join(cache_dir, layout.sft_offsets_name(split)),
            T=T,
            device=device,
            eot_id=meta["special_token_ids"]["eot"],
            truncation=truncation or meta.get("truncation", "head"),
            tokenizer=tokenizer,
            packing=packing,
            seed=seed,
            ignore_index=ignore_index,
            resident=resident,
        )

    def _sibling_meta(self, tokenizer) -> dict | None:
        path = Path(self.tokens_path).with_name(layout.META)
        if not path.exists():
            if tokenizer is not None:
                raise FileNotFoundError(f"{path}: no meta.json, so the cache's tokenizer cannot be checked")
            return None
        meta = read_meta(str(path))
        if tokenizer is not None and meta.get("tokenizer_sha256") != tokenizer.sha256:
            raise ValueError(
                f"{path}: cache was built with tokenizer sha256 {meta.get('tokenizer_sha256')}, but the tokenizer "
                f"in use ({tokenizer.model_path}) has sha256 {tokenizer.sha256}; rebuild the cache with this "
                "tokenizer or train with the one it was built with"
            )
        return meta

    def _special_ids(self, given, tokenizer) -> dict[str, int]:
        if given is not None:
            ids = dict(given)
        elif self.meta is not None and "special_token_ids" in self.meta:
            ids = dict(self.meta["special_token_ids"])
        elif tokenizer is not None:
            ids = dict(tokenizer.special_ids)
        else:
            raise ValueError(
                f"{self.tokens_path}: no meta.json beside it to read special ids from; pass special_ids= or tokenizer="
            )
        missing = {"sys", "usr", "asst", "eot"} - set(ids)
        if missing:
            raise ValueError(f"{self.tokens_path}: special ids lack {sorted(missing)}")
        return {k: int(v) for k, v in ids.items()}

    def _load_offsets(self, n_tok: int):
        try:
            starts = np.load(self.idx_path, allow_pickle=False)
        except FileNotFoundError:
            raise FileNotFoundError(f"{self.idx_path}: SFT offsets not found; build the SFT cache first") from None
        if starts.ndim != 1 or starts.dtype != OFFSET_DTYPE:
            raise ValueError(f"{self.idx_path}: expected a 1-D int64 offsets array, got {starts.dtype} {starts.shape}")
        if len(starts) and (starts[0] != 0 or starts[-1] > n_tok or (np.diff(starts) <= 0).any()):
            raise ValueError(
                f"{self.idx_path}: offsets must start at 0, increase strictly and stay within the "
                f"{n_tok:,} tokens of {self.tokens_path}"
            )
        if not len(starts) and n_tok:
            raise ValueError(f"{self.idx_path}: no offsets for {n_tok:,} tokens in {self.tokens_path}")
        return starts.astype(np.int64)

    def _fill(self, kept_lengths: np.ndarray) -> float:
        """The share of row slots that hold a token (the rest is padding)."""
        rows = len(self.packed) if self.packed is not None else len(kept_lengths)
        return float(kept_lengths.sum() / (rows * (self.T + 1))) if rows else 0.0

    # -- sampling ------------------------------------------------------------------------------
    @property
    def packing(self) -> bool:
        return self.packed is not None

    def __len__(self) -> int:
        """Items that can be sampled: kept examples (padded), or packed rows."""
        return len(self.packed) if self.packed is not None else len(self.kept)

    def rows(self, ids):
        """Items `ids` (0..len-1) as numpy arrays, each (len(ids), T): (x, y, y_masked) int64, and packed
        also segment_ids (int32) and position_ids (int64)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.packed is None:
            pos, valid = row_positions(self.segments.take(ids), self.T + 1)
            return self._xy(pos, valid, None)
        slots = slot_map(self.pieces, ids, self.T + 1)
        x, y, y_masked = self._xy(slots.positions, slots.valid, slots.firsts)
        return x, y, y_masked, slots.segment_ids, slots.position_ids

    def _xy(self, pos: np.ndarray, valid: np.ndarray, firsts: np.ndarray | None):
        """x, y, y_masked of rows whose slots read tokens `pos` where `valid` (eot elsewhere); a target
        counts where it is loss-active, except, packed, at the first slot of an example (flat indices
        `firsts`): that target would be predicted from the previous example."""
        seq = np.where(valid, self.tokens[pos], self.eot_id).astype(np.int64)
        active = self.mask[pos] & valid
        if firsts is not None:
            active.reshape(-1)[firsts] = False
        y = np.ascontiguousarray(seq[:, 1:])
        return np.ascontiguousarray(seq[:, :-1]), y, np.where(active[:, 1:], y, self.ignore_index)

    def uniform_draw(self):
        """(n, None): draw_items is torch.randint(n, (B,)) (training/random_replay.py); None when it refuses."""
        return (len(self), None) if len(self) else None

    def draw_items(self, B: int, generator=None) -> np.ndarray:
        """B items (int64) drawn uniformly with replacement: get_batch's one draw (refused when there are none)."""
        import torch

        on_purpose = ((self.meta or {}).get("empty_splits") or {}).get(self._split_name())
        if not self.num_examples and on_purpose:
            raise ValueError(
                f"{self.tokens_path}: this split is empty on purpose ({on_purpose}); "
                "nothing to sample - set val_frac above 0 and rebuild to have one"
            )
        if not len(self):
            raise ValueError(
                f"{self.tokens_path}: no example has a loss-active target within T+1={self.T + 1} tokens "
                f"({self.num_examples:,} examples, {self.num_excluded:,} excluded); nothing to sample"
            )
        return torch.randint(len(self), (B,), generator=generator).numpy()

    def get_batch(self, *, B: int, generator=None):
        """`rows` of B items drawn uniformly (kept examples, or packed rows) as tensors on `device`."""
        from niels_gpt.to_device import to_device

        ids = self.draw_items(B, generator)
        if self.resident is not None:
            return self.resident.rows(ids)
        return to_device(self.rows(ids), self.device)

    def _split_name(self) -> str | None:
        return next((s for s in layout.SPLITS if Path(self.tokens_path).name == layout.sft_tokens_name(s)), None)

    @property
    def identity(self) -> str:
        """Digest of the split's files (meta.json's sha256s, else their sizes), the truncation and, packed,
        the packing seed (T is the loader's own)."""
        files = (self.meta or {}).get("files") or {}
        listed = {}
        for path in (self.tokens_path, self.idx_path):
            name = os.path.basename(path)
            listed[name] = files[name]["sha256"] if name in files else os.path.getsize(path)
        packing = {"packing_seed": self.seed} if self.packed is not None else {}
        return sha256_json({"sft_files": listed, "truncation": self.truncation, **packing})

    def __repr__(self) -> str:
        return (
            f"SFTExampleDataset({self.tokens_path!r}, T={self.T}, truncation={self.truncation!r}, "
            f"examples={len(self.kept):,} kept / {self.num_examples:,}, excluded={self.num_excluded:,}"
            + (f", packed into {len(self):,} rows, {self.fill:.1%} tokens)" if self.packed is not None else ")")
        )
