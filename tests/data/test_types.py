"""types: the samples every loader yields are frozen values, and the role vocabulary is the Role literal's."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest

from niels_gpt.data.types import ROLES, ChatMessage, ChatSample, PretrainSample, Role


def test_roles_are_the_role_literal():
    assert ROLES == get_args(Role) == ("system", "user", "assistant")


@pytest.mark.parametrize(
    "value",
    [PretrainSample("t", "s", {}), ChatMessage("user", "hi"), ChatSample([ChatMessage("user", "hi")], "s", {})],
)
def test_samples_are_frozen_and_compare_by_value(value):
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.source = "other"  # a ChatMessage has no source: assigning any attribute is refused
    assert value == dataclasses.replace(value)


def test_field_names_are_the_interface():
    names = {
        cls.__name__: [f.name for f in dataclasses.fields(cls)] for cls in (PretrainSample, ChatMessage, ChatSample)
    }
    assert names == {
        "PretrainSample": ["text", "source", "meta"],
        "ChatMessage": ["role", "content"],
        "ChatSample": ["messages", "source", "meta"],
    }
