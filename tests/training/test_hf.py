"""training/hf.py: tiny randomly initialised transformers causal LMs (Llama with sdpa attention, GPT-2 with
eager attention; float64, eval mode, built from configs, no download) given `hf_inputs` of dict batches
cut from real caches compute the project's masked cross-entropy, and inside packed rows every example is
computed exactly as if it were alone (restarting position_ids, and the 4-D additive mask)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.sft.dataset import SFTExampleDataset
from niels_gpt.training import hf
from niels_gpt.training.batch_dict import as_dict
from niels_gpt.training.hf import additive_block_mask, hf_inputs
from niels_gpt.training.loss import masked_cross_entropy

T = 128  # a packed row of the packable caches then holds up to 8 examples
LOSS_TOL = 1e-6  # both losses are computed in float32 (transformers casts the logits), even for a float64 model
LOGIT_TOL = 1e-9  # float64 logits of an example inside its packed row and alone: measured <= 5e-16
MODELS = ("llama-sdpa", "gpt2-eager")


@pytest.fixture(scope="module")
def models(tiny_tokenizer):
    """The two tiny models, built once: {name: model}."""
    transformers = pytest.importorskip("transformers")
    vocab = tiny_tokenizer.vocab_size
    torch.manual_seed(0)
    llama = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=T,
        attn_implementation="sdpa",
    )
    gpt2 = transformers.GPT2Config(
        vocab_size=vocab,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=T,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="eager",
    )
    built = {
        "llama-sdpa": transformers.LlamaForCausalLM(llama),
        "gpt2-eager": transformers.GPT2LMHeadModel(gpt2),
    }
    return {name: model.to(torch.float64).eval() for name, model in built.items()}


@pytest.fixture(scope="module")
def rows(loader_caches, packable_caches, tiny_tokenizer) -> dict[str, dict]:
    """Dict batches of 3 rows: pretrain windows, padded SFT examples, and the 3 packed rows holding the
    most examples."""
    g = torch.Generator().manual_seed(0)
    pretrain = PretrainTokenStreamDataset(loader_caches / "pretrain" / "fineweb_edu" / "train", T=T)
    padded = SFTExampleDataset.from_cache_dir(loader_caches / "sft" / "oasst1", "train", T=T, tokenizer=tiny_tokenizer)
    packed = SFTExampleDataset.from_cache_dir(
        packable_caches / "sft" / "dolly15k", "train", T=T, tokenizer=tiny_tokenizer, packing=True
    )
    segment_ids = packed.rows(np.arange(len(packed)))[3]
    fullest = np.argsort(-segment_ids.max(axis=1), kind="stable")[:3]
    return {
        "pretrain": as_dict(*pretrain.get_batch(B=3, generator=g)),
        "padded SFT": as_dict(*padded.get_batch(B=3, generator=g)),
        "packed SFT": as_dict(*packed.rows(fullest)),
    }


@pytest.mark.parametrize("kind", ["pretrain", "padded SFT", "packed SFT"])
@pytest.mark.parametrize("name", MODELS)
def test_model_loss_is_the_projects_masked_cross_entropy(models, rows, name, kind):
    model, batch = models[name], rows[kind]
    for packed_mask in ("position_ids", "4d"):
        with torch.no_grad():
            out = model(**hf_inputs(batch, model, packed_mask=packed_mask))
        ours = masked_cross_entropy(out.logits, batch["shift_labels"])
        assert out.loss.dtype == ours.dtype == torch.float32
        assert abs(out.loss.item() - ours.item()) <= LOSS_TOL, (name, kind, packed_mask)
    # without shift_labels the model shifts labels itself: the same targets but the rows' last ones
    with torch.no_grad():
        out = model(**hf_inputs(batch, model, shift_labels=False))
    last_dropped = masked_cross_entropy(out.logits[:, :-1], batch["shift_labels"][:, :-1])
    assert abs(out.loss.item() - last_dropped.item()) <= LOSS_TOL


def examples_of(segment_ids: torch.Tensor) -> list[tuple[int, int, int]]:
    """(row, start, end) of every example (segment_id > 0) of packed rows."""
    spans = []
    for row, ids in enumerate(segment_ids.tolist()):
        for k in sorted(set(ids) - {0}):
            where = [t for t, s in enumerate(ids) if s == k]
            spans.append((row, where[0], where[-1] + 1))
    return spans


@pytest.mark.parametrize("kind", ["pretrain", "padded SFT", "packed SFT"])
@pytest.mark.parametrize("name", MODELS)
def test_a_dict_batch_as_it_is_gives_the_same_loss(models, rows, name, kind):
    """`model(**batch)`: transformers takes shift_labels and lets segment_ids pass unused."""
    with torch.no_grad():
        out = models[name](**rows[kind], use_cache=False)
    assert abs(out.loss.item() - masked_cross_entropy(out.logits, rows[kind]["shift_labels"]).item()) <= LOSS_TOL


@pytest.mark.parametrize("packed_mask", ["position_ids", "4d", "the dict batch as it is"])
@pytest.mark.parametrize("name", MODELS)
def test_examples_inside_a_packed_row_are_computed_as_if_alone(models, rows, name, packed_mask):
    model, batch = models[name], rows["packed SFT"]
    spans = examples_of(batch["segment_ids"])
    assert len(spans) >= 8 and all(end - start >= 2 for _, start, end in spans)
    with torch.no_grad():
        if packed_mask == "the dict batch as it is":
            packed = model(**batch, use_cache=False).logits
        else:
            packed = model(**hf_inputs(batch, model, packed_mask=packed_mask)).logits
        causal = model(input_ids=batch["input_ids"], use_cache=False).logits  # one sequence per row: leaks
        # with a cache transformers does not look for packed rows in position_ids: leaks too
        cached = model(**{**hf_inputs(batch, model), "use_cache": True}).logits
    leaked = {"causal": 0.0, "cache": 0.0}
    for row, start, end in spans:
        alone_batch = {key: batch[key][row : row + 1, start:end] for key in ("input_ids", "shift_labels")}
        assert torch.equal(batch["position_ids"][row, start:end], torch.arange(end - start))
        with torch.no_grad():
            alone = model(input_ids=alone_batch["input_ids"], use_cache=False).logits
        inside = packed[row : row + 1, start:end]
        assert (inside - alone).abs().max().item() <= LOGIT_TOL, (name, row, start)
        targets = alone_batch["shift_labels"]
        if (targets != -100).any():
            loss_inside, loss_alone = (masked_cross_entropy(z, targets) for z in (inside, alone))
            assert abs(loss_inside.item() - loss_alone.item()) <= LOSS_TOL
        for control, logits in (("causal", causal), ("cache", cached)):
            leaked[control] = max(leaked[control], (logits[row : row + 1, start:end] - alone).abs().max().item())
    assert min(leaked.values()) > 1e-3, leaked  # the controls read earlier examples (measured 0.1-0.3)


def test_packed_rows_ignore_the_target_that_crosses_into_the_next_example(rows):
    batch = rows["packed SFT"]
    for row, start, end in examples_of(batch["segment_ids"]):
        assert batch["labels"][row, start] == -100  # the example's first token is nobody's target
        assert batch["shift_labels"][row, end - 1] == -100  # its last token predicts nothing


def test_additive_block_mask_is_zero_where_the_block_causal_mask_allows():
    segment_ids = torch.tensor([[1, 1, 2, 2, 2, 0], [1, 1, 1, 1, 1, 1]])
    for dtype in (torch.float32, torch.bfloat16):
        mask = additive_block_mask(segment_ids, dtype)
        assert mask.shape == (2, 1, 6, 6) and mask.dtype == dtype
        allowed = mask == 0
        assert allowed[0, 0, 3].tolist() == [False, False, True, True, False, False]
        assert allowed[1, 0].equal(torch.ones(6, 6, dtype=torch.bool).tril())
        assert (mask[~allowed] == torch.finfo(dtype).min).all()


def test_hf_inputs_names_what_a_batch_lacks_and_the_mask_choices(rows):
    with pytest.raises(ValueError, match="not a dict batch: no labels, position_ids, shift_labels"):
        hf_inputs({"input_ids": torch.zeros(1, 4, dtype=torch.int64)})
    with pytest.raises(ValueError, match="packed_mask must be one of"):
        hf_inputs(rows["packed SFT"], packed_mask="bool")
    inputs = hf_inputs(rows["pretrain"], packed_mask="4d")
    assert "attention_mask" not in inputs and inputs["use_cache"] is False  # only packed rows get a mask
    assert hf_inputs(rows["packed SFT"], packed_mask="4d", dtype=torch.bfloat16)["attention_mask"].dtype == (
        torch.bfloat16
    )


def test_position_ids_packing_refuses_a_transformers_that_cannot_split_rows(rows, monkeypatch):
    monkeypatch.setattr(hf, "transformers_version", lambda: "4.53.2")
    with pytest.raises(ValueError, match="transformers 4.53.2 does not split packed rows.*packed_mask='4d'"):
        hf_inputs(rows["packed SFT"])
    assert "attention_mask" in hf_inputs(rows["packed SFT"], packed_mask="4d")
    hf_inputs(rows["pretrain"])  # unpacked rows need no splitting


def test_the_package_imports_without_transformers():
    code = "import sys; sys.modules['transformers'] = None; import niels_gpt.training.hf, niels_gpt.training.loss"
    subprocess.run([sys.executable, "-c", code], check=True)
