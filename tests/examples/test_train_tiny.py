"""examples/train_tiny.py on demo caches: pretraining then packed fine-tuning lowers the val loss, and a
resumed run (mid-pretraining, and at the switch to fine-tuning) continues with the same losses and
ends with the same model, to the bit; batches prefetched by a background thread give the same losses and
checkpoints as batches read in the loop; bf16 autocast trains; packed rows attend inside their examples
with the dense mask and with FlexAttention's BlockMask (forward on the CPU), and flex training on the CPU
is refused."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
STEPS = 24  # per phase


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


STEP_LINE = re.compile(r"(pretrain|sft) step (\d+)/(\d+): train loss (\S+) \| \d+ ms/step, ETA (?:\d+:)?\d+:\d\d$")


def train_lines(lines: list[str]) -> list[str]:
    """The step lines as "pretrain step 3: train loss 4.123456", without the phase's length and the timing
    (val losses are also printed at a phase's last step, which differs between runs)."""
    steps = [STEP_LINE.match(line) for line in lines if "train loss" in line]
    assert all(steps), [line for line in lines if "train loss" in line and not STEP_LINE.match(line)]
    return [f"{m.group(1)} step {m.group(2)}: train loss {m.group(4)}" for m in steps]


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


def test_prefetching_changes_no_loss_and_bf16_autocast_trains(train_tiny, demo_cache, tmp_path, capsys):
    steps = ["--steps", "6", "--sft-steps", "6", "--save-every", "3"]
    prefetched = train_lines(run(train_tiny, capsys, demo_cache, tmp_path / "a.pt", *steps, "--prefetch", "3"))
    read_in_loop = train_lines(run(train_tiny, capsys, demo_cache, tmp_path / "b.pt", *steps, "--prefetch", "0"))
    assert len(prefetched) == 12 and prefetched == read_in_loop
    saved = [torch.load(tmp_path / name, weights_only=True)["loader"] for name in ("a.pt", "b.pt")]
    assert saved[0] == saved[1]  # the state after the last batch trained on, not after those made ahead
    bf16 = run(train_tiny, capsys, demo_cache, tmp_path / "c.pt", "--steps", "2", "--sft-steps", "2", "--dtype", "bf16")
    losses = [float(line.rsplit(" ", 1)[1]) for line in train_lines(bf16)]  # "... train loss 4.123456"
    assert len(losses) == 4 and all(0 < loss < 20 for loss in losses)


def test_a_run_writes_under_the_cache_and_says_its_step_time_eta_and_checkpoints(
    train_tiny, demo_cache, tmp_path, capsys, monkeypatch
):
    cache = tmp_path / "cache"  # the demo caches, read through links: the run adds runs/ beside them
    cache.mkdir()
    for entry in demo_cache.iterdir():
        (cache / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # where the command is typed: nothing may land here
    args = ["--cache", str(cache), "--T", "64", "--steps", "3", "--sft-steps", "0", "--save-every", "2"]
    train_tiny.main(args)
    lines = capsys.readouterr().out.splitlines()
    checkpoint = cache / "runs" / "train_tiny" / "checkpoint.pt"
    assert [line for line in lines if line.startswith("checkpoint:")] == [
        f"checkpoint: {checkpoint} (pretrain step 2/3)",
        f"checkpoint: {checkpoint} (pretrain step 3/3)",
    ]
    assert torch.load(checkpoint, weights_only=True)["step"] == 3 and list(work.iterdir()) == []
    steps = [STEP_LINE.match(line) for line in lines if "train loss" in line]
    assert [(m.group(2), m.group(3)) for m in steps] == [("1", "3"), ("2", "3"), ("3", "3")]
    assert steps[-1].group(0).endswith("ETA 0:00")  # the last step: nothing left

    run = tmp_path / "run"
    train_tiny.main([*args, "--steps", "4", "--out-dir", str(run), "--save-every", "4"])
    assert f"checkpoint: {run / 'checkpoint.pt'} (pretrain step 4/4)" in capsys.readouterr().out.splitlines()
    train_tiny.main([*args, "--steps", "5", "--out-dir", str(run), "--resume"])
    assert f"resuming from {run / 'checkpoint.pt'} (pretrain step 4)" in capsys.readouterr().out.splitlines()


@pytest.fixture(scope="module")
def packed_rows(demo_cache):
    """(x, segment_ids, position_ids) of the 4 packed rows (T=256) of the demo oasst1 cache holding the most
    examples, and the vocabulary size."""
    import numpy as np

    from niels_gpt import layout
    from niels_gpt.sft.dataset import SFTExampleDataset
    from niels_gpt.tokenizer import SentencePieceTokenizer

    tok = SentencePieceTokenizer(layout.tokenizer_model(demo_cache))
    ds = SFTExampleDataset.from_cache_dir(layout.sft_dir(demo_cache, "oasst1"), "train", T=256, packing=True)
    segment_ids = ds.rows(np.arange(len(ds)))[3]
    x, _, _, segment_ids, position_ids = ds.rows(np.argsort(-segment_ids.max(axis=1), kind="stable")[:4])
    return tuple(torch.from_numpy(a).long() for a in (x, segment_ids, position_ids)), tok.vocab_size


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_packed_rows_attend_inside_their_examples_with_either_mask(train_tiny, packed_rows):
    (x, segment_ids, position_ids), vocab = packed_rows
    torch.manual_seed(0)
    sdpa = train_tiny.GPT(vocab, 256, d=32, layers=2, heads=4, attention="sdpa").eval()
    flex = train_tiny.GPT(vocab, 256, d=32, layers=2, heads=4, attention="flex").eval()
    flex.load_state_dict(sdpa.state_dict())
    with torch.no_grad():
        packed = sdpa(x, segment_ids, position_ids)
        # FlexAttention has no backward pass on the CPU (torch 2.13), but its forward runs: the same mask
        assert (flex(x, segment_ids, position_ids) - packed).abs().max() < 1e-5
        examples = 0
        for row, ids in enumerate(segment_ids.tolist()):
            for k in set(ids) - {0}:
                where = [t for t, s in enumerate(ids) if s == k]
                start, end = where[0], where[-1] + 1
                alone = sdpa(x[row : row + 1, start:end])  # positions 0.. as the packed row's restart
                assert (packed[row, start:end] - alone[0]).abs().max() < 1e-5
                examples += 1
    assert examples >= 2 * len(x)  # the rows hold several examples each


def test_flex_attention_on_the_cpu_is_refused_with_the_fix(train_tiny, demo_cache, tmp_path):
    with pytest.raises(SystemExit, match="FlexAttention has no backward pass on the CPU.*--attention sdpa"):
        train_tiny.main(["--cache", str(demo_cache), "--attention", "flex", "--checkpoint", str(tmp_path / "x.pt")])
