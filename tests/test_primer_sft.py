"""Primer as an SFT source: render + masking of system/user/assistant, a deterministic split, and a
`build-sft-primer` build smoke test."""

from __future__ import annotations

import numpy as np

from niels_gpt.cache.meta import REQUIRED_SFT, read_meta
from niels_gpt.chat_template import render_chat_sft
from niels_gpt.splits import val_mask
from tests.support.chats import random_chats
from tests.support.primer import build_primer, write_primer

N = 40


def test_render_and_masking_sys_user_assistant(tiny_tokenizer):
    sp = tiny_tokenizer.special_ids
    msgs = [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello there"},
    ]
    ids, labels = render_chat_sft(tiny_tokenizer, msgs)
    assert len(ids) == len(labels)
    asst_at = ids.index(sp["asst"])
    assert all(v == -100 for v in labels[: asst_at + 1])
    assert labels[asst_at + 1 :] == ids[asst_at + 1 :] and labels[-1] == sp["eot"]


def test_split_is_deterministic_for_a_seed(tiny_tokenizer, tiny_tokenizer_path, tmp_path):
    primer = write_primer(tmp_path / "primer.jsonl", random_chats(N, seed=8))
    assert build_primer(tmp_path, tiny_tokenizer_path, primer, out="a") == 0
    assert build_primer(tmp_path, tiny_tokenizer_path, primer, out="b") == 0
    assert build_primer(tmp_path, tiny_tokenizer_path, primer, out="c", seed=1) == 0
    a, b, c = (tmp_path / x / "primer" for x in "abc")
    assert (a / "val_idx.npy").read_bytes() == (b / "val_idx.npy").read_bytes()
    assert (a / "val_tokens.bin").read_bytes() == (b / "val_tokens.bin").read_bytes()
    assert (a / "val_tokens.bin").read_bytes() != (c / "val_tokens.bin").read_bytes()
    chats = random_chats(N, seed=8)
    for out, seed in ((a, 42), (c, 1)):  # val holds exactly the lines the seeded split rule picks, in file order
        held_out = [chat for chat, v in zip(chats, val_mask(N, 0.1, seed)) if v]
        want = [t for chat in held_out for t in render_chat_sft(tiny_tokenizer, chat)[0]]
        assert np.fromfile(out / "val_tokens.bin", dtype="<u2").tolist() == want and len(held_out) == 4


def test_build_sft_primer_smoke(tiny_tokenizer, tiny_tokenizer_path, tmp_path, capsys):
    chats = random_chats(N, seed=9)
    primer = write_primer(tmp_path / "primer.jsonl", chats)
    assert build_primer(tmp_path, tiny_tokenizer_path, primer) == 0
    out = tmp_path / "sft" / "primer"
    meta = read_meta(str(out / "meta.json"))
    for key in REQUIRED_SFT + ("source", "splits", "val_frac", "seed", "T_max", "truncation"):
        assert key in meta, key
    assert meta["source"] == "primer" and meta["seed"] == 42 and meta["val_frac"] == 0.1 and meta["T_max"] == 1024
    assert meta["truncation"] == "tail"  # the primer default: keep the last turns
    for split in ("train", "val"):
        assert {"num_examples", "num_tokens", "num_label_tokens"} <= set(meta["splits"][split])
        assert (out / f"{split}_tokens.bin").stat().st_size > 0 and (out / f"{split}_idx.npy").exists()
    assert meta["train_examples"] + meta["val_examples"] == N and meta["val_examples"] == 4
    assert meta["provenance"]["path"] == str(primer)
    logged = capsys.readouterr().err  # the summary is a milestone: stderr
    assert f"train: {N - 4:,} examples" in logged and str(out / "train_tokens.bin") in logged
    # the first train example is the first primer line not held out
    first = val_mask(N, 0.1, 42).index(False)
    tokens = np.fromfile(out / "train_tokens.bin", dtype="<u2")
    idx = np.load(out / "train_idx.npy")
    assert tokens[: idx[1]].tolist() == render_chat_sft(tiny_tokenizer, chats[first])[0]
