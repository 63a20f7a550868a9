"""Synthetic caches for the batch benchmarks: random ids in the on-disk formats the datasets read.

- `write_shards(folder, sizes, seed)`: pretrain shards `shard_00000.bin`, ... of uint16 ids < VOCAB, one
  numpy generator for all of them (so the same sizes and seed give the same bytes), read back once so
  the page cache is warm before anything is timed.
- `write_sft_cache(out, n_examples, seed)`: an SFT cache (train_tokens.bin, train_idx.npy, meta.json)
  of chat examples: an optional system message, 1-4 user/assistant pairs, log-normal content lengths.
  `chat_roles` + `write_messages` write caches of other shapes (bench_sft_packing).
Every message is rendered as the chat template renders it: role id, content ids, eot.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from niels_gpt.special_tokens import SPECIAL_TOKENS

VOCAB = 16_004  # the pipeline's default tokenizer: 16,000 pieces + 4 specials
SP = {name: 1 + i for i, name in enumerate(SPECIAL_TOKENS)}  # ids 1..4, after <unk> (tokenizer/model.py)
FIRST_ORDINARY = 263  # first learned piece (tokenizer/model.py): content never contains a special id


def write_shards(folder: Path, sizes: list[int], seed: int = 0) -> list[Path]:
    """One shard of `n` random uint16 ids per size in `sizes`, page cache warmed."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i, n in enumerate(sizes):
        path = folder / f"shard_{i:05d}.bin"
        rng.integers(0, VOCAB, n, dtype=np.uint16).astype("<u2").tofile(path)
        paths.append(path)
    for path in paths:
        path.read_bytes()
    return paths


def write_messages(out: Path, n_msgs: np.ndarray, roles: np.ndarray, content: np.ndarray, rng) -> int:
    """Write {out}/train_tokens.bin, train_idx.npy, meta.json for examples of `n_msgs` messages each, whose
    messages (all examples' in order) have role ids `roles` and `content` tokens of ordinary ids drawn
    from `rng` (role token + content + eot, as the chat template renders them); returns the token count."""
    first_msg = np.concatenate([[0], np.cumsum(n_msgs)[:-1]])
    msg_len = content + 2  # role + content + eot
    msg_start = np.concatenate([[0], np.cumsum(msg_len)[:-1]])
    tokens = rng.integers(FIRST_ORDINARY, VOCAB, int(msg_len.sum())).astype("<u2")
    tokens[msg_start] = roles
    tokens[msg_start + msg_len - 1] = SP["eot"]
    out.mkdir(parents=True, exist_ok=True)
    tokens.tofile(out / "train_tokens.bin")
    np.save(out / "train_idx.npy", msg_start[first_msg].astype(np.int64))
    meta = {"special_token_ids": SP, "truncation": "head", "tokenizer_sha256": None, "built": True}
    (out / "meta.json").write_text(json.dumps(meta))
    return len(tokens)


def chat_roles(pairs: np.ndarray, has_sys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(messages per example, role id of every message): an optional system message, then `pairs`
    user/assistant pairs."""
    n_msgs = 2 * pairs + has_sys
    ex_of_msg = np.repeat(np.arange(len(pairs)), n_msgs)
    first_msg = np.concatenate([[0], np.cumsum(n_msgs)[:-1]])
    k = np.arange(len(ex_of_msg)) - first_msg[ex_of_msg] - has_sys[ex_of_msg]  # -1 = system
    return n_msgs, np.where(k < 0, SP["sys"], np.where(k % 2 == 0, SP["usr"], SP["asst"]))


def write_sft_cache(out: Path, n_examples: int, seed: int = 0) -> int:
    """1-4 user/assistant pairs, a system message in 30 % of examples, log-normal content lengths."""
    rng = np.random.default_rng(seed)
    turns = rng.integers(1, 5, n_examples)  # user/assistant pairs
    has_sys = rng.random(n_examples) < 0.3
    n_msgs, roles = chat_roles(turns, has_sys)
    content = np.minimum(rng.lognormal(3.8, 0.9, len(roles)).astype(np.int64), 3000)
    return write_messages(out, n_msgs, roles, content, rng)
