"""SFT masking: in sys..eot usr..eot asst A B eot, only A, B and that eot are loss targets (everything else -100)."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.chat_template import loss_mask_from_tokens

SP = {"sys": 1, "usr": 2, "asst": 3, "eot": 4}
S, U, A_, E = SP["sys"], SP["usr"], SP["asst"], SP["eot"]
TOK_A, TOK_B = 300, 301
# <sys> s1 s2 <eot> <usr> u1 <eot> <asst> A B <eot>
SEQ = [S, 310, 311, E, U, 320, E, A_, TOK_A, TOK_B, E]
TARGET_POSITIONS = [8, 9, 10]  # A, B, the assistant's eot


def write_cache(tmp_path, examples):
    tokens = np.concatenate([np.array(e, dtype="<u2") for e in examples])
    tokens.tofile(tmp_path / "train_tokens.bin")
    np.save(tmp_path / "train_idx.npy", np.cumsum([0] + [len(e) for e in examples[:-1]]).astype(np.int64))
    return tmp_path / "train_tokens.bin", tmp_path / "train_idx.npy"


def test_token_mask_marks_only_a_b_and_eot():
    mask = loss_mask_from_tokens(np.array(SEQ), SP)
    assert np.flatnonzero(mask).tolist() == TARGET_POSITIONS


@pytest.mark.parametrize("T", [len(SEQ) - 1, 16])  # exactly fits; padded
def test_y_masked_targets_are_only_a_b_and_eot(tmp_path, T):
    tokens, idx = write_cache(tmp_path, [SEQ])
    ds = SFTExampleDataset(tokens, idx, T=T, device="cpu", eot_id=E, special_ids=SP)
    x, y, y_masked = ds.rows([0])
    active = np.flatnonzero(y_masked[0] != -100)
    assert (active + 1).tolist() == TARGET_POSITIONS  # y[t] is the token at position t+1
    assert y_masked[0, active].tolist() == [TOK_A, TOK_B, E]


def test_masking_does_not_leak_between_examples(tmp_path):
    # an example ending mid-assistant (no final eot) followed by a user-only-prefixed example
    first = [U, 320, E, A_, TOK_A, TOK_B]
    tokens, idx = write_cache(tmp_path, [first, SEQ])
    ds = SFTExampleDataset(tokens, idx, T=12, device="cpu", eot_id=E, special_ids=SP)
    _, _, ym = ds.rows([0, 1])
    assert (np.flatnonzero(ym[0] != -100) + 1).tolist() == [4, 5]
    assert (np.flatnonzero(ym[1] != -100) + 1).tolist() == TARGET_POSITIONS
