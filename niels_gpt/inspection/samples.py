"""`inspect`: decoded samples of one cache, to see what a model will actually be trained on.

- pretrain: `n` random windows of `tokens` tokens from one split (uniform over token positions,
  cut at a shard's end), decoded;
- sft: `n` random examples (or `--example I`) rendered in full, the loss-active tokens (the targets
  the model is trained on: assistant content and its eot, `loss_mask_from_tokens`) wrapped in
  `[[`...`]]`, or shown green on a terminal; a header says how the dataset cuts an example longer
  than T_max+1;
- streams: `n` random windows of `n_bytes` bytes of one stream, decoded as UTF-8 (errors='replace').
Special ids are shown by their short names (`<|sys|>`, `<|usr|>`, `<|asst|>`, `<|eot|>`) rather than
the 45-character literals `decode_with_specials` prints, so a message that merely quotes a literal
special string (ordinary pieces, never a control token) still shows it literally.
Draws come from `torch.Generator().manual_seed(seed)`: the same seed shows the same samples.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from niels_gpt.chat_template import loss_mask_from_tokens
from niels_gpt.inspection.tree import Artifact, default_tokenizer_path, find_artifacts
from niels_gpt.layout import SPLITS
from niels_gpt.meta import is_built
from niels_gpt.sft.windows import kept_segments
from niels_gpt.token_files import open_tokens

ACTIVE_OPEN, ACTIVE_CLOSE = "[[", "]]"
ANSI_OPEN, ANSI_CLOSE = "\033[32m", "\033[0m"  # green: loss-active text on a terminal
DEFAULT_TOKENS = 128  # pretrain window: a few sentences
DEFAULT_BYTES = 400  # stream window: about as much text as a pretrain window


def decode_named(tokenizer, ids) -> str:
    """Ordinary ids decoded in runs; each special id shown as `<|name|>`."""
    return tokenizer.decode_with_specials(ids, short_names=True)


def render_example(tokenizer, ids, mask, *, color: bool = False) -> str:
    """The example's text with each run of loss-active tokens wrapped (brackets, or ANSI green)."""
    opener, closer = (ANSI_OPEN, ANSI_CLOSE) if color else (ACTIVE_OPEN, ACTIVE_CLOSE)
    ids, mask = np.asarray(ids), np.asarray(mask, dtype=bool)
    cuts = np.flatnonzero(np.diff(mask.astype(np.int8))) + 1
    out = []
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ids)]):
        text = decode_named(tokenizer, ids[lo:hi])
        out.append(f"{opener}{text}{closer}" if mask[lo] else text)
    return "".join(out)


def _plural(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _generator(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)


def _randint(high: int, n: int, g) -> list[int]:
    import torch

    return torch.randint(0, max(high, 1), (n,), generator=g).tolist()


def inspect_pretrain(art: Artifact, split: str, tokenizer, *, n: int, seed: int, tokens: int) -> list[str]:
    shards = art.files(split)
    maps = [open_tokens(p) for p in shards]
    ends = np.cumsum([len(m) for m in maps])
    if not len(maps) or ends[-1] == 0:
        raise ValueError(f"{art.path / split}: this split holds no tokens; nothing to inspect")
    total = f"{int(ends[-1]):,} tokens in {_plural(len(maps), 'shard')}"
    out = [f"{art.name} {split}: {total}; {_plural(n, 'random window')} of {tokens:,} tokens"]
    for k, pos in enumerate(_randint(int(ends[-1]), n, _generator(seed)), 1):
        s = int(np.searchsorted(ends, pos, side="right"))
        off = pos - (int(ends[s - 1]) if s else 0)
        ids = maps[s][off : off + tokens]
        out += [
            "",
            f"--- [{k}] {shards[s].name} tokens {off:,}..{off + len(ids):,}",
            decode_named(tokenizer, ids),
        ]
    return out


def inspect_sft(
    art: Artifact, meta: dict, split: str, tokenizer, *, n: int, seed: int, example: int | None, color: bool
) -> list[str]:
    special = meta.get("special_token_ids") or tokenizer.special_ids
    (tokens_path,) = art.files(split)
    tokens = open_tokens(tokens_path)
    offsets = np.load(art.offsets(split), mmap_mode="r", allow_pickle=False)
    count = len(offsets)
    if not count:
        raise ValueError(f"{art.path}: the {split} split holds no examples; nothing to inspect")
    if example is not None and not 0 <= example < count:
        raise ValueError(f"--example {example} is out of range: {art.name} {split} has examples 0..{count - 1:,}")
    picks = [example] if example is not None else _randint(count, n, _generator(seed))
    t_max, trunc = meta.get("T_max"), meta.get("truncation", "head")
    mark = "green" if color else f"{ACTIVE_OPEN}...{ACTIVE_CLOSE}"
    out = [f"{art.name} {split}: {count:,} examples; loss-active tokens (the targets trained on) are shown {mark}"]
    for k, i in enumerate(picks, 1):
        lo = int(offsets[i])
        hi = int(offsets[i + 1]) if i + 1 < count else len(tokens)
        ids = np.asarray(tokens[lo:hi])
        mask = loss_mask_from_tokens(ids, special, example_starts=[0])
        head = f"--- [{k}] example {i:,} of {count:,}: {len(ids):,} tokens, {int(mask.sum()):,} loss-active"
        if t_max and len(ids) > t_max + 1:
            seg = kept_segments(mask, [0], [len(ids)], t_max, trunc)
            kept = [(int(lo[0]), int(lo[0] + n[0])) for lo, n in ((seg.lo1, seg.len1), (seg.lo2, seg.len2)) if n[0]]
            spans = " and ".join(f"{a:,}..{b:,}" for a, b in kept)
            head += f"; longer than T_max+1 = {t_max + 1:,}: the dataset keeps tokens {spans} ({trunc})"
        out += ["", head, render_example(tokenizer, ids, mask, color=color)]
    return out


def inspect_stream(art: Artifact, *, n: int, seed: int, n_bytes: int) -> list[str]:
    size = art.path.stat().st_size
    if size == 0:
        raise ValueError(f"{art.path}: empty stream; nothing to inspect")
    out = [f"{art.name}: {size:,} bytes; {_plural(n, 'random window')} of {n_bytes:,} bytes (UTF-8, errors replaced)"]
    with open(art.path, "rb") as f:
        for k, pos in enumerate(_randint(size - min(n_bytes, size) + 1, n, _generator(seed)), 1):
            f.seek(pos)
            data = f.read(n_bytes)
            out += ["", f"--- [{k}] bytes {pos:,}..{pos + len(data):,}", data.decode("utf-8", errors="replace")]
    return out


def inspect_cache(
    path: str | os.PathLike,
    *,
    n: int = 3,
    seed: int = 0,
    split: str | None = None,
    tokenizer_path=None,
    tokens: int = DEFAULT_TOKENS,
    n_bytes: int = DEFAULT_BYTES,
    example: int | None = None,
    color: bool = False,
) -> str:
    """Decoded samples of the one artifact `path` names (see the module docstring)."""
    if n < 1 or tokens < 1 or n_bytes < 1:
        raise ValueError(f"--n, --tokens and --bytes must be >= 1, got {n}, {tokens}, {n_bytes}")
    selection = find_artifacts(path)
    if len(selection.artifacts) != 1:
        names = ", ".join(str(a.path) for a in selection.artifacts[:6])
        raise ValueError(f"{path}: holds {len(selection.artifacts)} artifacts; inspect one of them, e.g. {names}")
    art = selection.artifacts[0]
    if art.kind == "tokenizer":
        raise ValueError(f"{path}: the tokenizer has no samples; inspect a pretrain, sft or streams cache")
    meta = art.read_meta()
    if not is_built(meta):
        raise ValueError(f"{art.path}: not built ({meta.get('reason', 'no reason recorded')}); nothing to inspect")
    if art.kind == "streams":
        return "\n".join(inspect_stream(art, n=n, seed=seed, n_bytes=n_bytes))
    if split is not None and selection.split is not None and split != selection.split:
        raise ValueError(f"{path} is the {selection.split} split, but --split {split} was given")
    split = split or selection.split or "train"
    if split not in SPLITS:
        raise ValueError(f"--split must be one of {SPLITS}, got {split!r}")
    tokenizer = load_inspect_tokenizer(tokenizer_path, selection)
    if meta.get("tokenizer_sha256") != tokenizer.sha256:
        raise ValueError(
            f"{art.path} was built with tokenizer sha256 {meta.get('tokenizer_sha256')}, but {tokenizer.model_path} "
            f"has sha256 {tokenizer.sha256}; its ids would decode to the wrong text - "
            "pass --tokenizer <the model it was built with>"
        )
    if art.kind == "pretrain":
        return "\n".join(inspect_pretrain(art, split, tokenizer, n=n, seed=seed, tokens=tokens))
    return "\n".join(inspect_sft(art, meta, split, tokenizer, n=n, seed=seed, example=example, color=color))


def load_inspect_tokenizer(tokenizer_path, selection):
    from niels_gpt.tokenizer import SentencePieceTokenizer

    path = Path(tokenizer_path) if tokenizer_path else default_tokenizer_path(selection)
    if path is None:
        raise ValueError(
            "the path is outside a cache tree, so there is no {cache}/tokenizer/spm.model; pass --tokenizer"
        )
    return SentencePieceTokenizer(path)
