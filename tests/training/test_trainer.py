"""The Hugging Face Trainer on a mixture without glue: `mix.rows()` and `RowCollator(B)` give every step one
whole batch of the mixture (the same with Trainer workers), its loss is masked_cross_entropy, another batch
size is refused with one message; and a stateful_loader's plain load_state_dict refuses another num_workers."""

from __future__ import annotations

import json

import pytest
import torch

from niels_gpt.training.hf import RowCollator, hf_inputs
from niels_gpt.training.loader_state import stateful_loader
from niels_gpt.training.loss import masked_cross_entropy
from niels_gpt.training.mixture import MixedBatches

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

PACKED_P = {"dolly15k": 0.3, "oasst1": 0.7}  # the sources of packable_caches
B, T = 4, 32


def tiny_llama(vocab: int):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=T,
    )
    return transformers.LlamaForCausalLM(config).eval()


def trainer_for(mix, tmp_path, vocab: int, **args):
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=2, report_to=[], save_strategy="no", use_cpu=True, **args
    )
    return transformers.Trainer(
        model=tiny_llama(vocab), args=args, train_dataset=mix.rows(), data_collator=RowCollator(mix.B)
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_every_trainer_step_is_one_whole_batch_of_the_mixture_and_its_loss_is_masked_cross_entropy(
    workers, packable_caches, tiny_tokenizer, tmp_path
):
    mix = MixedBatches.sft(packable_caches, p=PACKED_P, T=T, B=B, seed=1, packing=True, mode="epoch")
    trainer = trainer_for(
        mix, tmp_path, tiny_tokenizer.vocab_size, per_device_train_batch_size=B, dataloader_num_workers=workers
    )
    want = [hf_inputs(batch) for _, batch in zip(range(3), iter(mix))]
    got = [inputs for _, inputs in zip(range(3), trainer.get_train_dataloader())]
    for g, w in zip(got, want):
        assert g.keys() == w.keys() and all(torch.equal(g[k], w[k]) for k in w if isinstance(w[k], torch.Tensor))
    model = trainer.model
    with torch.no_grad():
        loss = trainer.compute_loss(model, dict(got[0]))
        counted = trainer._get_num_items_in_batch([got[0]], torch.device("cpu"))
        loss_counted = trainer.compute_loss(model, dict(got[0]), num_items_in_batch=counted)
        logits = model(input_ids=got[0]["input_ids"], position_ids=got[0]["position_ids"], use_cache=False).logits
    expected = masked_cross_entropy(logits, got[0]["shift_labels"])
    assert torch.allclose(loss, expected, atol=1e-6) and torch.allclose(loss_counted, expected, atol=1e-6)


def test_the_trainer_trains_on_the_mixture(packable_caches, tiny_tokenizer, tmp_path):
    mix = MixedBatches.sft(packable_caches, p=PACKED_P, T=T, B=B, seed=1, packing=True, mode="epoch")
    result = trainer_for(mix, tmp_path, tiny_tokenizer.vocab_size, per_device_train_batch_size=B).train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))


def test_another_batch_size_is_refused_with_one_message(packable_caches):
    mix = MixedBatches.sft(packable_caches, p=PACKED_P, T=T, B=B, seed=1, packing=True)
    rows = [row for _, row in zip(range(3), iter(mix.rows()))]
    with pytest.raises(ValueError, match=r"^got 3 rows, but a batch of this mixture has B=4: set "):
        RowCollator(B)(rows)


@pytest.mark.parametrize("saved, loaded", [(2, 0), (0, 2), (2, 1)])
def test_a_plain_load_state_dict_refuses_another_num_workers(saved, loaded, loader_caches):
    mix = MixedBatches.pretrain(loader_caches, p={"wikitext": 1.0}, T=16, B=4, seed=0)
    saver = stateful_loader(mix, batch_size=None, num_workers=saved)
    batches = iter(saver)
    next(batches)
    state = json.loads(json.dumps(saver.state_dict()))
    del batches, saver
    resumed = stateful_loader(mix, batch_size=None, num_workers=loaded)
    with pytest.raises(ValueError) as e:
        resumed.load_state_dict(state)
    assert str(e.value) == (
        f"refusing to resume: the state was saved by a loader with num_workers={saved} and this loader has "
        f"num_workers={loaded}; build the StatefulDataLoader with num_workers={saved} to resume it"
    )
