"""render_chat_sft (the template and its assistant-only labels) and the token-level mask that must agree with it."""

from __future__ import annotations

import numpy as np
import pytest

import niels_gpt.chat_template as ct
from niels_gpt.chat_template import loss_mask_from_tokens, render_chat_sft, render_chats
from niels_gpt.data.types import ChatMessage
from niels_gpt.special_tokens import SPECIAL_TOKENS
from tests.support.chats import random_chats

CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "where is the river?"},
    {"role": "assistant", "content": "north of the stone."},
]


def test_template_is_role_content_eot_per_message(tiny_tokenizer):
    tok, sp = tiny_tokenizer, tiny_tokenizer.special_ids
    ids, labels = render_chat_sft(tok, CHAT)
    expected = []
    for m, role in zip(CHAT, ("sys", "usr", "asst")):
        expected += [sp[role], *tok.encode(m["content"]), sp["eot"]]
    assert ids == expected
    assert len(labels) == len(ids)


def test_labels_cover_assistant_content_and_its_eot_only(tiny_tokenizer):
    tok = tiny_tokenizer
    ids, labels = render_chat_sft(tok, CHAT)
    n_asst = len(tok.encode(CHAT[2]["content"])) + 1  # content + eot
    assert labels[-n_asst:] == ids[-n_asst:]
    assert labels[-n_asst - 1] == -100  # the asst role token itself
    assert all(v == -100 for v in labels[:-n_asst])
    assert labels[-1] == tok.eot_id  # the model learns to stop


def test_multi_turn_labels_every_assistant_turn(tiny_tokenizer):
    tok = tiny_tokenizer
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}] * 3
    ids, labels = render_chat_sft(tok, chat)
    active = [i for i, v in enumerate(labels) if v != -100]
    assert [ids[i] for i in active] == (tok.encode("b") + [tok.eot_id]) * 3


def test_add_final_eot_false_drops_only_the_last_eot(tiny_tokenizer):
    with_eot, lab_with = render_chat_sft(tiny_tokenizer, CHAT)
    without, lab_without = render_chat_sft(tiny_tokenizer, CHAT, add_final_eot=False)
    assert without == with_eot[:-1] and lab_without == lab_with[:-1]


def test_chat_message_objects_render_like_dicts(tiny_tokenizer):
    objs = [ChatMessage(m["role"], m["content"]) for m in CHAT]
    assert render_chat_sft(tiny_tokenizer, objs) == render_chat_sft(tiny_tokenizer, CHAT)


def test_no_assistant_message_is_refused(tiny_tokenizer):
    with pytest.raises(ValueError, match="no assistant message"):
        render_chat_sft(tiny_tokenizer, CHAT[:2])


@pytest.mark.parametrize(
    "messages, match",
    [
        ([], r"^example: messages is empty"),
        ([{"role": "bot", "content": "x"}], r"^example, message 0: role must be one of .*, got 'bot'$"),
        ([{"role": "assistant", "content": 3}], r"^example, message 0: content must be a string, got int$"),
        ([{"role": "assistant"}], r"^example, message 0: content must be a string, got NoneType$"),
        ("assistant: hi", r"^example: messages must be a list of \{role, content\}, got str$"),
        (
            [{"role": "user", "content": "hi"}],
            r"^example: no assistant message \(roles: \['user'\]\); "
            r"an SFT example needs at least one assistant message to learn from$",
        ),
    ],
)
def test_malformed_messages_are_refused(tiny_tokenizer, messages, match):
    with pytest.raises(ValueError, match=match):
        render_chat_sft(tiny_tokenizer, messages)


@pytest.mark.parametrize("missing", ["role", "content"])
def test_an_object_without_role_or_content_is_refused_by_name(tiny_tokenizer, missing):
    class Message:  # what a loader might hand over: an object lacking one of the two fields
        def __init__(self):
            setattr(self, "content" if missing == "role" else "role", "assistant")

    with pytest.raises(ValueError, match=f"example, message 0: {missing} must be"):
        render_chat_sft(tiny_tokenizer, [Message()])


def test_labels_are_python_ints(tiny_tokenizer):
    ids, labels = render_chat_sft(tiny_tokenizer, CHAT)
    assert {type(v) for v in ids} == {int} and {type(v) for v in labels} == {int}


def test_rendering_no_examples_gives_empty_int64_arrays(tiny_tokenizer):
    r = render_chats(tiny_tokenizer, [])
    assert (r.tokens.dtype, r.mask.dtype, r.lengths.dtype) == (np.uint16, np.bool_, np.int64)
    assert r.tokens.shape == r.mask.shape == r.lengths.shape == (0,)


def test_tokens_before_the_first_role_token_are_not_targets(tiny_tokenizer):
    sp = tiny_tokenizer.special_ids
    tokens = np.array([300, 301, sp["asst"], 302, sp["eot"]], dtype=np.uint16)
    assert loss_mask_from_tokens(tokens, sp).tolist() == [False, False, False, True, True]


def test_first_message_may_be_assistant_and_order_is_kept(tiny_tokenizer):
    sp = tiny_tokenizer.special_ids
    ids, _ = render_chat_sft(
        tiny_tokenizer, [{"role": "assistant", "content": "x"}, {"role": "system", "content": "y"}]
    )
    assert ids[0] == sp["asst"] and sp["sys"] in ids[ids.index(sp["eot"]) :]


def test_eot_inside_content_is_not_special(tiny_tokenizer):
    tok = tiny_tokenizer
    content = "quote " + " ".join(SPECIAL_TOKENS.values())
    ids, labels = render_chat_sft(
        tok, [{"role": "user", "content": content}, {"role": "assistant", "content": content}]
    )
    specials = set(tok.special_ids.values())
    assert sum(i in specials for i in ids) == 4  # usr, eot, asst, eot: the inserted ones only
    assert tok.decode(ids) == content + content


def reference_render(tok, pairs, add_final_eot):
    """The template written out message by message with plain lists (what render_chats vectorizes)."""
    sp, ids, labels = tok.special_ids, [], []
    role_token = {"system": sp["sys"], "user": sp["usr"], "assistant": sp["asst"]}
    for i, (role, content) in enumerate(pairs):
        block = [role_token[role], *tok.encode(content)]
        if add_final_eot or i < len(pairs) - 1:
            block.append(sp["eot"])
        ids += block
        labels += [-100] + (block[1:] if role == "assistant" else [-100] * (len(block) - 1))
    return ids, labels


@pytest.mark.parametrize("add_final_eot", [True, False])
def test_batch_rendering_follows_the_template_message_by_message(tiny_tokenizer, add_final_eot):
    chats = random_chats(60, seed=3) + [[{"role": "user", "content": ""}, {"role": "assistant", "content": ""}]]
    pairs = [ct.normalize_messages(c) for c in chats]
    r = render_chats(tiny_tokenizer, pairs, add_final_eot=add_final_eot)
    assert r.tokens.dtype == np.dtype("<u2") and r.mask.dtype == bool and len(r.lengths) == len(chats)
    assert len(r.tokens) == len(r.mask) == r.lengths.sum()
    bounds = np.r_[0, np.cumsum(r.lengths)]
    for k, p in enumerate(pairs):
        ids, labels = reference_render(tiny_tokenizer, p, add_final_eot)
        assert r.tokens[bounds[k] : bounds[k + 1]].tolist() == ids
        assert r.mask[bounds[k] : bounds[k + 1]].tolist() == [v != -100 for v in labels]
        assert render_chat_sft(tiny_tokenizer, chats[k], add_final_eot=add_final_eot) == (ids, labels)


@pytest.mark.parametrize("add_final_eot", [True, False])
def test_token_mask_equals_render_labels_on_random_chats(tiny_tokenizer, add_final_eot):
    for chat in random_chats(400, seed=1):
        ids, labels = render_chat_sft(tiny_tokenizer, chat, add_final_eot=add_final_eot)
        mask = loss_mask_from_tokens(np.array(ids, dtype=np.uint16), tiny_tokenizer.special_ids)
        assert (mask == (np.array(labels) != -100)).all(), chat


def test_token_mask_over_concatenated_examples_and_chunks(tiny_tokenizer, monkeypatch):
    rendered = [render_chat_sft(tiny_tokenizer, c, add_final_eot=False) for c in random_chats(200, seed=2)]
    tokens = np.concatenate([np.array(ids, dtype=np.uint16) for ids, _ in rendered])
    expected = np.concatenate([np.array(lab) != -100 for _, lab in rendered])
    starts = np.cumsum([0] + [len(ids) for ids, _ in rendered[:-1]])
    monkeypatch.setattr(ct, "_MASK_CHUNK", 37)  # state must carry across chunk boundaries
    mask = loss_mask_from_tokens(tokens, tiny_tokenizer.special_ids, example_starts=starts)
    assert (mask == expected).all()


def test_example_start_resets_role_state(tiny_tokenizer):
    sp = tiny_tokenizer.special_ids
    # an example ending inside an assistant turn (no final eot), then one starting with plain tokens
    tokens = np.array([sp["asst"], 300, 301, 302, 303, sp["eot"]], dtype=np.uint16)
    assert loss_mask_from_tokens(tokens, sp).tolist() == [False, True, True, True, True, True]
    reset = loss_mask_from_tokens(tokens, sp, example_starts=[0, 3])
    assert reset.tolist() == [False, True, True, False, False, False]
