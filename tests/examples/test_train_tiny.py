"""examples/train_tiny.py on demo caches: pretraining then packed fine-tuning lowers the val loss, and a
resumed run (mid-pretraining, and at the switch to fine-tuning) continues with the same losses and
ends with the same model, to the bit."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from niels_gpt.cache.cli import main as cache_cli
from niels_gpt.command_line import run_cli

ROOT = Path(__file__).resolve().parents[2]
SMALL = {  # demo caches in a few seconds: the session's tokenizer, small budgets, no byte streams
    "sources.fineweb_edu.max_train_tokens": 20_000,
    "sources.fineweb_edu.max_val_tokens": 2_000,
    "sources.fineweb_edu.val_doc_prob": 0.2,
    "sources.wikitext.max_train_tokens": 20_000,
    "sources.wikitext.max_val_tokens": 5_000,
    "sources.roam.max_train_tokens": 20_000,
    "sources.roam.max_val_tokens": 5_000,
    "sft.t_max": 128,
    "streams.enabled_sources": "[]",
    "streams.required_sources": "[]",
}
STEPS = 24  # per phase


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory, tiny_tokenizer_path, isolated_hf_cache):
    cache = tmp_path_factory.mktemp("train_tiny") / "cache"
    sets = [f"--set={key}={value}" for key, value in {**SMALL, "tokenizer.model_path": tiny_tokenizer_path}.items()]
    assert run_cli(cache_cli, ["build-all", "--cache-dir", str(cache), "--seed", "42", "--demo", *sets]) == 0
    return cache


@pytest.fixture(scope="module")
def train_tiny():
    spec = importlib.util.spec_from_file_location("train_tiny", ROOT / "examples" / "train_tiny.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only contend on a busy machine
    yield module
    torch.set_num_threads(threads)


def run(train_tiny, capsys, cache, checkpoint, *args) -> list[str]:
    """Everything train_tiny prints: per step "pretrain step 3: train loss 4.123456", and val losses."""
    base = ["--cache", str(cache), "--T", "64", "--B", "8", "--eval-every", "12", "--checkpoint", str(checkpoint)]
    train_tiny.main([*base, *args])
    return capsys.readouterr().out.splitlines()


def train_lines(lines: list[str]) -> list[str]:
    """The step lines (val losses are also printed at a phase's last step, which differs between runs)."""
    return [line for line in lines if "train loss" in line]


def val_losses(lines: list[str], phase: str) -> list[float]:
    return [float(m.group(1)) for line in lines if (m := re.match(rf"{phase} val loss (\S+) \(after", line))]


def test_pretraining_then_packed_fine_tuning_lowers_val_loss_and_resumes_exactly(
    train_tiny, demo_cache, tmp_path, capsys
):
    steps = ["--steps", str(STEPS), "--sft-steps", str(STEPS)]
    straight = run(train_tiny, capsys, demo_cache, tmp_path / "straight.pt", *steps)
    done = train_lines(straight)
    assert len(done) == 2 * STEPS and done[STEPS].startswith("sft step 1: train loss")
    for phase in ("pretrain", "sft"):
        losses = val_losses(straight, phase)  # before, after 12 and after 24 steps
        assert len(losses) == 3 and losses[-1] < losses[0] - 0.1, (phase, losses)

    # stopped in the middle of pretraining, then resumed: the rest of both phases is the same
    stopped = train_lines(run(train_tiny, capsys, demo_cache, tmp_path / "a.pt", "--steps", "10", "--sft-steps", "0"))
    resumed = train_lines(run(train_tiny, capsys, demo_cache, tmp_path / "a.pt", *steps, "--resume"))
    assert len(stopped) == 10 and stopped + resumed == done
    # stopped in the middle of fine-tuning (the packed loader's state), then resumed
    half = train_lines(run(train_tiny, capsys, demo_cache, tmp_path / "b.pt", *steps[:2], "--sft-steps", "7"))
    rest = train_lines(run(train_tiny, capsys, demo_cache, tmp_path / "b.pt", *steps, "--resume"))
    assert len(half) == STEPS + 7 and half + rest == done
    for name in ("a.pt", "b.pt"):  # and the same model, optimizer and loader position at the end
        ends = [torch.load(tmp_path / f, weights_only=True) for f in (name, "straight.pt")]
        assert ends[0]["loader"] == ends[1]["loader"] and (ends[0]["phase"], ends[0]["step"]) == (1, STEPS)
        assert all(torch.equal(ends[0]["model"][k], v) for k, v in ends[1]["model"].items())
        assert ends[0]["optimizer"]["state"][0]["step"] == ends[1]["optimizer"]["state"][0]["step"] == 2 * STEPS
