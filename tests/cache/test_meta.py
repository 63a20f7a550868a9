"""niels_gpt.cache.meta: the public name of the meta.json contract (niels_gpt.meta) and of sha256_file."""

from __future__ import annotations

import pytest

from niels_gpt import hashing
from niels_gpt import meta as contract
from niels_gpt.cache import meta as public


def test_the_public_names_are_the_contracts_objects():
    for name in public.__all__:
        want = hashing.sha256_file if name == "sha256_file" else getattr(contract, name)
        assert getattr(public, name) is want, name


def test_a_meta_written_through_the_public_name_reads_back_and_is_checked(tmp_path):
    record = public.not_built("sft", reason="sources.x.enabled is false", format_version=1, seed=0)
    public.write_meta(tmp_path / "meta.json", record)
    assert public.read_meta(tmp_path / "meta.json") == record and not public.is_built(record)
    assert public.sha256_file(tmp_path / "meta.json") == hashing.sha256_file(tmp_path / "meta.json")
    with pytest.raises(ValueError, match=r"missing required field\(s\) val_tokens$"):
        public.check_required({"train_tokens": 1}, ("train_tokens", "val_tokens"))
