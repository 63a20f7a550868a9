"""`python -m niels_gpt.cache.cli`: every stage's commands under one parser, run as a module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from niels_gpt.cache import cli

COMMANDS = {
    "build-tokenizer",
    "build-pretrain",
    "merge-pretrain",
    "build-sft",
    "build-sft-primer",
    "build-streams",
    "build-all",
    "curate",
    "apply-curation",
    "certify",
    "verify",
    "info",
    "inspect",
    "report-figures",
    "leakage",
}


def test_every_command_is_registered():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == COMMANDS


def test_a_command_is_required():
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2


@pytest.mark.parametrize("command", ["build-all", "build-tokenizer"])
def test_runs_as_a_module(command):
    done = subprocess.run(
        [sys.executable, "-m", "niels_gpt.cache.cli", command, "--help"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith(f"usage: python -m niels_gpt.cache.cli {command}")
