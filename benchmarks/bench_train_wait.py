"""How long a training step waits for its batch: in the loop vs prefetched by a background thread.

A GPT-2-style model (examples/train_tiny.py's GPT: learned positions, pre-norm blocks, tied head; the
defaults are GPT-2 small, 124 M parameters with a 50,304-id vocabulary) trains with AdamW on batches of
MixedLoader(mode="epoch") over three synthetic pretrain sources (benchmarks/synthetic.py), placed on
--device by the readers (pinned memory and non-blocking copies on CUDA). Two contenders, each with its
own loader and model, interleaved in rounds of --steps steps after --warmup steps each:
  in-loop   `next(loader)`: the batch is gathered and copied when the step asks for it;
  prefetch  `next(prefetch(loader, device, depth=2))`: a background thread keeps the next batches ready.
Per step: wait = the time blocked in `next()`, step = from that call to the end of `loss.item()` (which
waits for the GPU, as a loop that logs its loss does). Reported per contender: medians of wait and step,
the wait share (median wait / median step, and total wait / total step), and tokens per second
(B * T / median step); then the per-round ratio of median steps, prefetch / in-loop. The goal on a GPU:
a wait under 1 % of the step at B=32, T=1024.

    python -m benchmarks.bench_train_wait --device cuda --dtype bf16 --compile        # GPT-2 small, B=32 T=1024
    python -m benchmarks.bench_train_wait --d 128 --layers 2 --heads 4 --vocab 16004 --B 8 --T 256   # a CPU
"""

from __future__ import annotations

import importlib.util
import statistics
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from benchmarks.synthetic import VOCAB, write_shards
from benchmarks.timing import batch_arguments, spread
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.training.loss import masked_cross_entropy
from niels_gpt.training.prefetch import prefetch

MIX = {"fineweb_edu": 0.6, "gutenberg": 0.1, "wikitext": 0.3}
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_tiny.py"


def gpt_class():
    """The GPT of examples/train_tiny.py (an example script, not a module of the package)."""
    spec = importlib.util.spec_from_file_location("train_tiny", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GPT


class Trainer:
    """One contender: its own model, optimizer and batches; `step()` -> (wait s, step s)."""

    def __init__(self, args, sources: dict, prefetched: bool):
        torch.manual_seed(0)
        model = gpt_class()(args.vocab, args.T, args.d, args.layers, args.heads).to(args.device)
        self.params = sum(p.numel() for p in model.parameters())
        self.model = torch.compile(model) if args.compile else model
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.device == "cuda")
        loader = MixedLoader(sources, p=MIX, B=args.B, seed=0, mode="epoch")
        self.batches = prefetch(loader, args.device, depth=2) if prefetched else loader
        device = torch.device(args.device).type
        bf16 = args.dtype == "bf16"
        self.autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if bf16 else nullcontext

    def step(self) -> tuple[float, float]:
        start = time.perf_counter()
        batch = next(self.batches)
        got = time.perf_counter()
        with self.autocast():
            loss = masked_cross_entropy(self.model(batch.x), batch.y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        loss.item()
        return got - start, time.perf_counter() - start


def report(name: str, waits: list[float], steps: list[float], tokens: int) -> None:
    wait, step = statistics.median(waits), statistics.median(steps)
    print(
        f"{name:9s}: wait median {wait * 1e3:8.3f} ms (max {max(waits) * 1e3:.3f}) | step median {step * 1e3:9.2f} ms "
        f"| wait share {wait / step:7.3%} median, {sum(waits) / sum(steps):7.3%} total | {tokens / step:,.0f} tokens/s"
    )


def main() -> None:
    ap = batch_arguments(__doc__, B=32, T=1024, rounds=5, seconds=None)
    ap.add_argument("--steps", type=int, default=20, help="steps per contender per round (default 20)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per contender first (default 5)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="default: cuda if any")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast (default fp32)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (as GPU training would)")
    ap.add_argument("--d", type=int, default=768, help="model width (default 768: GPT-2 small)")
    ap.add_argument("--layers", type=int, default=12, help="blocks (default 12)")
    ap.add_argument("--heads", type=int, default=12, help="attention heads (default 12)")
    ap.add_argument("--vocab", type=int, default=50_304, help="vocabulary (default 50,304; ids drawn < 16,004)")
    ap.add_argument("--tokens", type=int, default=5_000_000, help="tokens per synthetic source (default 5M)")
    args = ap.parse_args()
    if args.vocab < VOCAB:
        ap.error(f"--vocab must be at least {VOCAB:,}: the synthetic ids go up to {VOCAB - 1:,}")
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    with tempfile.TemporaryDirectory(prefix="bench_train_wait_") as tmp:
        for k, name in enumerate(MIX):
            write_shards(Path(tmp) / name, [args.tokens], seed=k)
        sources = {name: PretrainTokenStreamDataset(Path(tmp) / name, T=args.T, device=args.device) for name in MIX}
        trainers = {"in-loop": Trainer(args, sources, False), "prefetch": Trainer(args, sources, True)}
        params = trainers["in-loop"].params
        print(
            f"{args.device} ({torch.cuda.get_device_name() if args.device == 'cuda' else torch.get_num_threads()}"
            f"{'' if args.device == 'cuda' else ' threads'}), torch {torch.__version__}, {args.dtype}"
            f"{', compiled' if args.compile else ''}; GPT {params / 1e6:.1f} M parameters (d={args.d}, "
            f"{args.layers} layers, {args.heads} heads, vocab {args.vocab:,}); B={args.B} T={args.T}; "
            f"{args.rounds} rounds x {args.steps} steps per contender after {args.warmup} warm-up steps"
        )
        for trainer in trainers.values():
            for _ in range(args.warmup):
                trainer.step()
        times = {name: ([], []) for name in trainers}
        round_steps = {name: [] for name in trainers}  # median step of each round
        for _ in range(args.rounds):
            for name, trainer in trainers.items():
                waits, steps = zip(*(trainer.step() for _ in range(args.steps)))
                times[name][0].extend(waits)
                times[name][1].extend(steps)
                round_steps[name].append(statistics.median(steps))
        for name, (waits, steps) in times.items():
            report(name, waits, steps, args.B * args.T)
        per_round = [a / b for a, b in zip(round_steps["prefetch"], round_steps["in-loop"])]
        print(f"step time prefetch / in-loop, per round: {spread(per_round)}")
        trainers["prefetch"].batches.close()


if __name__ == "__main__":
    main()
