"""SFTExampleDataset: y_masked equals the shifted render_chat_sft labels, head and tail, on every example."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sft_chats import random_chats

from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.chat_template import render_chat_sft
from niels_gpt.sft.writer import build_sft_cache, write_not_built

CHATS = random_chats(150, seed=5, max_messages=9, max_words=40)  # lengths ~5..600 tokens


@pytest.fixture(scope="module")
def cache(tiny_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft")
    build_sft_cache(CHATS, str(out), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=100_000)
    return out


def expected_rows(tok, chats, T, truncation):
    """Independent reference: cut the rendered example, pad with eot / -100, shift."""
    rows = []
    for chat in chats:
        ids, labels = render_chat_sft(tok, chat)
        w = min(len(ids), T + 1)
        a = 0 if truncation == "head" else len(ids) - w
        seq = ids[a : a + w] + [tok.eot_id] * (T + 1 - w)
        lab = labels[a : a + w] + [-100] * (T + 1 - w)
        rows.append((seq[:-1], seq[1:], lab[1:]))
    return rows


def open_ds(cache, T, truncation="head", **kw):
    return SFTExampleDataset(
        cache / "train_tokens.bin", cache / "train_idx.npy", T=T, device="cpu", eot_id=4, truncation=truncation, **kw
    )


@pytest.mark.parametrize("truncation", ["head", "tail"])
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
    if T == 16:
        assert ds.num_excluded > 0  # some long prompts leave no target in the first 17 tokens
    if T == 700:
        assert len(ds) == len(CHATS)


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


@pytest.mark.parametrize("truncation", ["head", "tail"])
def test_writer_drops_exactly_what_the_dataset_would_exclude_at_T_max(tiny_tokenizer, cache, tmp_path, truncation):
    full = open_ds(cache, 16, truncation)
    meta = build_sft_cache(
        CHATS, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=16, truncation=truncation
    )
    assert meta["num_dropped"]["train"] == full.num_excluded > 0
    assert SFTExampleDataset.from_cache_dir(tmp_path, T=16).num_excluded == 0
