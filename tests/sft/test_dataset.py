"""SFTExampleDataset: y_masked equals the shifted render_chat_sft labels of the kept tokens, for head, tail
and prompt truncation, on every example; prompt truncation keeps the final reply; the writer agrees."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.chat_template import render_chat_sft
from niels_gpt.sft.writer import build_sft_cache, write_not_built
from tests.support.chats import random_chats

CHATS = random_chats(150, seed=5, max_messages=9, max_words=40)  # lengths ~5..600 tokens


@pytest.fixture(scope="module")
def cache(tiny_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft")
    build_sft_cache(CHATS, str(out), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=100_000)
    return out


def kept_positions(tok, chat, T, truncation) -> list[int]:
    """Independent reference of the kept token positions, from the rendered messages' blocks."""
    ids, _ = render_chat_sft(tok, chat)
    n, W = len(ids), T + 1
    if n <= W or truncation == "head":
        return list(range(min(n, W)))
    if truncation == "tail":
        return list(range(n - W, n))
    blocks, pos = [], 0  # (role, start, end) of every message: role token .. its eot
    for m in chat:
        size = len(tok.encode(m["content"])) + 2
        blocks.append((m["role"], pos, pos + size))
        pos += size
    replies = [(a, b) for role, a, b in blocks if role == "assistant"]
    a, b = replies[-1]
    if b - a > W:
        return list(range(a, a + W))  # the reply alone is too long: its head
    room = W - (b - a)
    if a <= room:
        return list(range(b))  # the prompt fits: only messages after the reply are cut
    h = min(room // 2, replies[0][0])
    return list(range(h)) + list(range(a - (room - h), b))


def expected_rows(tok, chats, T, truncation):
    """Independent reference: keep the reference positions, pad with eot / -100, shift."""
    rows = []
    for chat in chats:
        ids, labels = render_chat_sft(tok, chat)
        keep = kept_positions(tok, chat, T, truncation)
        pad = T + 1 - len(keep)
        seq = [ids[p] for p in keep] + [tok.eot_id] * pad
        lab = [labels[p] for p in keep] + [-100] * pad
        rows.append((seq[:-1], seq[1:], lab[1:]))
    return rows


def open_ds(cache, T, truncation="head", **kw):
    return SFTExampleDataset(
        cache / "train_tokens.bin", cache / "train_idx.npy", T=T, device="cpu", eot_id=4, truncation=truncation, **kw
    )


@pytest.mark.parametrize("truncation", ["head", "tail", "prompt"])
@pytest.mark.parametrize("T", [16, 64, 700])
def test_y_masked_equals_shifted_render_labels_on_every_example(tiny_tokenizer, cache, T, truncation):
    ds = open_ds(cache, T, truncation)
    expected = expected_rows(tiny_tokenizer, CHATS, T, truncation)
    kept = [i for i, (_, _, ym) in enumerate(expected) if any(v != -100 for v in ym)]
    assert ds.kept.tolist() == kept and ds.num_excluded == len(CHATS) - len(kept)
    x, y, ym = ds.rows(np.arange(len(ds)))
    for k, i in enumerate(kept):
        ex, ey, eym = expected[i]
        assert x[k].tolist() == ex and y[k].tolist() == ey and ym[k].tolist() == eym, (i, T, truncation)
    if T == 16 and truncation != "prompt":
        assert ds.num_excluded > 0  # some long prompts leave no target in the first 17 tokens
    if T == 700 or truncation == "prompt":
        assert len(ds) == len(CHATS)  # prompt truncation keeps every example's final reply
    if T == 16 and truncation == "prompt":  # every shape of cut occurs
        assert ds.cut["prompt"] > 0 and ds.cut["reply"] > 0
        two = ds.segments.len2 > 0
        assert two.any() and (~two & (ds.segments.cut == 1)).any()


def test_some_examples_are_longer_than_T_and_multi_turn(tiny_tokenizer):
    lengths = [len(render_chat_sft(tiny_tokenizer, c)[0]) for c in CHATS]
    assert max(lengths) > 65 and min(lengths) < 17
    assert sum(sum(m["role"] == "assistant" for m in c) >= 2 for c in CHATS) > 20


def test_get_batch_shapes_shift_and_no_all_ignored_row(cache):
    ds = open_ds(cache, 16)
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        x, y, ym = ds.get_batch(B=8, generator=g)
        assert x.shape == y.shape == ym.shape == (8, 16) and x.dtype == y.dtype == ym.dtype == torch.int64
        assert (y[:, :-1] == x[:, 1:]).all()
        assert ((ym != -100).sum(dim=1) > 0).all()
        assert ((ym == y) | (ym == -100)).all()


def test_padding_is_eot_with_ignored_targets(tiny_tokenizer, cache):
    ds = open_ds(cache, 700)
    lengths = np.diff(np.append(np.load(cache / "train_idx.npy"), ds.tokens.shape[0]))
    i = int(np.argmin(lengths))
    x, y, ym = ds.rows([i])
    n = int(lengths[i])
    assert (x[0, n:] == tiny_tokenizer.eot_id).all() and (y[0, n - 1 :] == tiny_tokenizer.eot_id).all()
    assert (ym[0, n - 1 :] == -100).all()


def test_same_generator_seed_same_batch(cache):
    ds = open_ds(cache, 64)
    a = ds.get_batch(B=16, generator=torch.Generator().manual_seed(3))
    b = ds.get_batch(B=16, generator=torch.Generator().manual_seed(3))
    c = ds.get_batch(B=16, generator=torch.Generator().manual_seed(4))
    assert all((p == q).all() for p, q in zip(a, b))
    assert not (a[0] == c[0]).all()


def test_sampling_is_one_randint_over_kept_examples(cache):
    ds = open_ds(cache, 16)
    ids = torch.randint(len(ds), (8,), generator=torch.Generator().manual_seed(9)).numpy()
    got = ds.get_batch(B=8, generator=torch.Generator().manual_seed(9))
    assert all((torch.from_numpy(e) == g).all() for e, g in zip(ds.rows(ids), got))


def test_from_cache_dir_reads_truncation_and_special_ids(tiny_tokenizer, tmp_path):
    build_sft_cache(CHATS, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.1, seed=0, truncation="tail")
    ds = SFTExampleDataset.from_cache_dir(tmp_path, "val", T=32, tokenizer=tiny_tokenizer)
    assert ds.truncation == "tail" and ds.special_ids == tiny_tokenizer.special_ids and ds.num_examples == 15


def test_tokenizer_mismatch_is_refused(cache):
    class Other:
        sha256 = "0" * 64
        model_path = "other/spm.model"

    with pytest.raises(ValueError, match="other/spm.model") as e:
        open_ds(cache, 16, tokenizer=Other())
    meta = json.loads((cache / "meta.json").read_text())
    assert meta["tokenizer_sha256"] in str(e.value) and "0" * 64 in str(e.value) and str(cache) in str(e.value)


def test_not_built_cache_is_refused(tmp_path):
    write_not_built(tmp_path, source="dolly15k", reason="sources.dolly15k.enabled is false", seed=1)
    with pytest.raises(ValueError, match="not built.*enabled is false"):
        SFTExampleDataset.from_cache_dir(tmp_path, T=8)


def test_corrupt_offsets_are_refused(cache, tmp_path):
    (tmp_path / "t.bin").write_bytes((cache / "train_tokens.bin").read_bytes())
    np.save(tmp_path / "i.npy", np.array([0, 10, 5], dtype=np.int64))
    with pytest.raises(ValueError, match="increase strictly"):
        SFTExampleDataset(
            tmp_path / "t.bin", tmp_path / "i.npy", T=8, eot_id=4, special_ids={"sys": 1, "usr": 2, "asst": 3, "eot": 4}
        )


def test_no_sampleable_example_errors_clearly(tmp_path):
    np.array([2, 300, 301, 4, 3, 302, 4], dtype="<u2").tofile(tmp_path / "t.bin")  # usr .. eot asst x eot
    np.save(tmp_path / "i.npy", np.array([0], dtype=np.int64))
    ds = SFTExampleDataset(
        tmp_path / "t.bin", tmp_path / "i.npy", T=3, eot_id=4, special_ids={"sys": 1, "usr": 2, "asst": 3, "eot": 4}
    )
    assert len(ds) == 0 and ds.num_excluded == 1
    with pytest.raises(ValueError, match="nothing to sample"):
        ds.get_batch(B=2, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("truncation", ["head", "tail", "prompt"])
def test_writer_drops_exactly_what_the_dataset_would_exclude_at_T_max(tiny_tokenizer, cache, tmp_path, truncation):
    full = open_ds(cache, 16, truncation)
    meta = build_sft_cache(
        CHATS, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=16, truncation=truncation
    )
    assert (
        meta["num_dropped"]["train"]
        == full.num_excluded
        == (0 if truncation == "prompt" else meta["num_dropped"]["train"])
    )
    assert meta["splits"]["train"]["dropped"] == full.excluded and meta["splits"]["train"]["cut"] == full.cut
    assert sum(full.cut.values()) == meta["splits"]["train"]["num_truncated"] > 0
    assert SFTExampleDataset.from_cache_dir(tmp_path, T=16).num_excluded == 0
    if truncation != "prompt":
        assert full.excluded["no_target_in_window"] > 0


def test_a_long_context_costs_the_prompt_not_the_reply(tiny_tokenizer, tmp_path):
    from niels_gpt.data.dolly import dolly_row_to_chat

    context = " ".join(["the river passes the stone bridge and the old market"] * 60)  # far more than 65 tokens
    row = {"instruction": "Summarize the passage.", "context": context, "response": "A river and a bridge."}
    chats = [dolly_row_to_chat(row, 0), [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]]
    head = build_sft_cache(chats, str(tmp_path / "h"), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=64)
    assert head["splits"]["train"]["dropped"] == {"no_assistant_reply": 0, "no_target_in_window": 1}
    meta = build_sft_cache(
        chats, str(tmp_path / "p"), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=64, truncation="prompt"
    )
    assert meta["num_dropped"]["train"] == 0 and meta["splits"]["train"]["cut"] == {"prompt": 1, "reply": 0}
    ds = SFTExampleDataset.from_cache_dir(tmp_path / "p", T=64)
    x, y, ym = ds.rows([0])
    text = tiny_tokenizer.decode([t for t in x[0].tolist() + y[0, -1:].tolist() if t > 4])
    reply = tiny_tokenizer.encode("A river and a bridge.")
    # the instruction and the start of the context, then the end of the context, then the whole reply
    assert text.startswith("Summarize the passage.") and text.endswith("the old marketA river and a bridge.")
    assert len(x[0]) == 64 and tiny_tokenizer.eot_id == y[0, -1]  # the window is full, up to the reply's eot
    assert [t for t in ym[0].tolist() if t != -100] == reply + [tiny_tokenizer.eot_id]  # the whole reply is trained


def test_a_split_left_empty_fails_unless_on_purpose(tiny_tokenizer, tmp_path):
    one = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]]
    with pytest.raises(ValueError) as e:  # one example cannot be split: val would hold none
        build_sft_cache(one, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.1, seed=0, source="dolly15k")
    assert str(e.value) == (
        "dolly15k: the val split would hold 0 examples (examples read: 0, dropped: none; split by "
        "sources.dolly15k.val_frac=0.1). To fix: raise sources.dolly15k.val_frac so val gets examples, or set "
        "sources.dolly15k.val_frac: 0 to build without val on purpose"
    )
    assert not list(tmp_path.iterdir())  # nothing that looks complete (nothing at all) is left
    meta = build_sft_cache(one, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, source="dolly15k")
    assert meta["empty_splits"] == {"val": "val_frac is 0: built without val on purpose"}
    ds = SFTExampleDataset.from_cache_dir(tmp_path, "val", T=8)
    with pytest.raises(ValueError, match=r"val_tokens\.bin: this split is empty on purpose \(val_frac is 0"):
        ds.get_batch(B=2, generator=torch.Generator().manual_seed(0))
