"""scripts.mutation: every group names modules and test files that exist; its mutmut section lists them."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import mutation

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("group", sorted(mutation.GROUPS))
def test_group_files_exist(group):
    modules, tests = mutation.GROUPS[group]
    missing = [p for p in [*modules, *tests, *mutation.ALSO_COPY] if not (ROOT / p).exists()]
    assert not missing, f"group {group!r} names files that do not exist: {missing}"
    assert all(p.startswith("niels_gpt/") for p in modules) and all(p.startswith("tests/") for p in tests)


def test_setup_cfg_lists_the_group_and_runs_tests_in_a_fixed_order():
    modules, tests = mutation.GROUPS["sft"]
    cfg = mutation.setup_cfg("sft")
    assert cfg.startswith("[mutmut]\nsource_paths = niels_gpt\n")
    assert "only_mutate =" + "".join(f"\n    {m}" for m in modules) in cfg
    assert "pytest_add_cli_args_test_selection =" + "".join(f"\n    {t}" for t in tests) in cfg
    assert "no:randomly" in cfg
