"""niels_gpt.special_tokens: the four chat specials and the role map are fixed (caches and models depend on them)."""

from __future__ import annotations

from niels_gpt.special_tokens import ROLE_TO_SPECIAL, SPECIAL_SUFFIX, SPECIAL_TOKENS


def test_the_special_strings_and_their_order_are_pinned():
    assert list(SPECIAL_TOKENS) == ["sys", "usr", "asst", "eot"]  # the order of their ids
    assert SPECIAL_TOKENS == {
        "sys": "<|ngpt_sys_84a5023f67d74cf29cc4001becde983c|>",
        "usr": "<|ngpt_usr_84a5023f67d74cf29cc4001becde983c|>",
        "asst": "<|ngpt_asst_84a5023f67d74cf29cc4001becde983c|>",
        "eot": "<|ngpt_eot_84a5023f67d74cf29cc4001becde983c|>",
    }
    assert all(SPECIAL_SUFFIX in literal for literal in SPECIAL_TOKENS.values())


def test_each_chat_role_has_its_own_role_token_and_eot_is_none():
    assert ROLE_TO_SPECIAL == {"system": "sys", "user": "usr", "assistant": "asst"}
    assert set(ROLE_TO_SPECIAL.values()) == set(SPECIAL_TOKENS) - {"eot"}
