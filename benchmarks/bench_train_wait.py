"""What each way of feeding batches costs a training loop: tokens/s as a share of the limit, per preset and loop style.

One GPT (examples/train_tiny.py's: learned positions, pre-norm blocks, tied head) and one AdamW optimizer,
shared by every contender (only the batch source differs), trains on three synthetic pretrain sources
(benchmarks/synthetic.py) mixed 0.6/0.1/0.3 in epoch mode. Contenders, interleaved in every round:
  limit       a pool of batches already on the device, cycled: no data path at all (the reference);
  resident    MixedLoader with the caches resident on the device (`made_resident()`, the openers' resident=True);
  in-loop     MixedLoader on the host (memory-mapped caches; pinned memory and non-blocking copies on CUDA);
  prefetch    `prefetch(MixedLoader, device, depth=2)`: a background thread makes the next batches;
  DataLoader  README's recipe: `DataLoader(MixedBatches, batch_size=None, num_workers=2, pin_memory=True)`, then
              each tensor's `.to(device, non_blocking=True)`;
  nanoGPT     nanoGPT's `get_batch`: memmap re-opened, B slices stacked, pinned, non_blocking (the outside reference).
Presets: `gpt2` (GPT-2 small: d=768, 12 layers, 12 heads, vocab 50,304, B=32, T=1024) and `small` (6 x 384,
6 heads, vocab 16,004, B=64, T=256). Loop styles: `every` (the loss is read, `loss.item()`, every step: the
host waits for the device each step) and `every N` (read once per --read-every steps). Per contender and
round: --steps steps after the round's first step, timed from the first batch to the last loss read
(device synchronized); tokens/s; the ratio to the limit's tokens/s in the same round. Reported: the median
ratio over rounds (min, max), and the median main-thread time per batch spent getting it (`wait`: inside
next() and the copy to the device). Goal on a GPU: >= 0.99 of the limit for every project path at both presets
in both loop styles.

    python -m benchmarks.bench_train_wait --device cuda --dtype bf16 --compile      # both presets, on a GPU
    python -m benchmarks.bench_train_wait --preset small --rounds 3 --steps 5        # a CPU: waits only
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from benchmarks.synthetic import VOCAB, write_shards
from benchmarks.timing import spread
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.training.loss import masked_cross_entropy
from niels_gpt.training.mixture import MixedBatches
from niels_gpt.training.prefetch import prefetch

MIX = {"fineweb_edu": 0.6, "gutenberg": 0.1, "wikitext": 0.3}
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_tiny.py"
PRESETS = {  # d, layers, heads, vocab, B, T
    "gpt2": (768, 12, 12, 50_304, 32, 1024),
    "small": (384, 6, 6, 16_004, 64, 256),
}
POOL = 8  # batches the limit cycles through


def gpt_class():
    """The GPT of examples/train_tiny.py (an example script, not a module of the package)."""
    spec = importlib.util.spec_from_file_location("train_tiny", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GPT


def open_loader(root: str, *, T: int, resident: bool = False, device="cpu", **mixing) -> MixedLoader:
    """MixedLoader over the synthetic sources in `root` (module level: DataLoader workers unpickle it)."""
    sources = {name: PretrainTokenStreamDataset(Path(root) / name, T=T, device=device) for name in MIX}
    loader = MixedLoader(sources, p=MIX, mode="epoch", **mixing)
    return loader.made_resident() if resident else loader


def nanogpt_batches(root: Path, B: int, T: int, device: torch.device):
    paths = sorted((root / "fineweb_edu").glob("*.bin"))
    g = torch.Generator().manual_seed(0)
    while True:
        data = np.memmap(paths[int(torch.randint(len(paths), (1,), generator=g))], dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - T, (B,), generator=g)
        x = torch.stack([torch.from_numpy(data[i : i + T].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + T].astype(np.int64)) for i in ix])
        if device.type == "cuda":
            x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        yield x, y


def batch_sources(root: Path, B: int, T: int, device: torch.device) -> dict:
    """{contender: an iterator of (x, y) on `device`}."""
    kw = {"T": T, "B": B, "seed": 0}
    host = open_loader(root, device=device, **kw)
    pool = [(b.x.clone(), b.y.clone()) for b in (next(host) for _ in range(POOL))]

    def cycle():
        while True:
            yield from pool

    def xy(batches):
        for b in batches:
            yield b.x, b.y

    def from_dicts(loader):
        for batch in loader:
            yield batch["input_ids"].to(device, non_blocking=True), batch["shift_labels"].to(device, non_blocking=True)

    mix = MixedBatches(partial(open_loader, str(root), **kw))
    dataloader = DataLoader(mix, batch_size=None, num_workers=2, pin_memory=device.type == "cuda")
    return {
        "limit": cycle(),
        "resident": xy(open_loader(root, device=device, resident=True, **kw)),
        "in-loop": xy(open_loader(root, device=device, **kw)),
        "prefetch": xy(prefetch(open_loader(root, device=device, **kw), device, depth=2)),
        "DataLoader": from_dicts(dataloader),
        "nanoGPT": nanogpt_batches(root, B, T, device),
    }


class Loop:
    """The shared model and optimizer; `run(batches, steps, read_every)` -> (seconds, main-thread waits)."""

    def __init__(self, args, d, layers, heads, vocab, T):
        torch.manual_seed(0)
        model = gpt_class()(vocab, T, d, layers, heads).to(args.device)
        self.params = sum(p.numel() for p in model.parameters())
        self.model = torch.compile(model) if args.compile else model
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=args.device.type == "cuda")
        bf16 = args.dtype == "bf16"
        self.autocast = (lambda: torch.autocast(args.device.type, dtype=torch.bfloat16)) if bf16 else nullcontext
        self.device = args.device

    def step(self, x, y):
        with self.autocast():
            loss = masked_cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, batches, steps: int, read_every: int) -> tuple[float, list[float]]:
        self.step(*next(batches)).item()  # the round's first step: the source is warm, the device idle
        self.sync()
        waits = []
        start = time.perf_counter()
        for k in range(steps):
            got = time.perf_counter()
            x, y = next(batches)
            waits.append(time.perf_counter() - got)
            loss = self.step(x, y)
            if (k + 1) % read_every == 0 or k + 1 == steps:
                loss.item()
        self.sync()
        return time.perf_counter() - start, waits


def run_preset(name: str, root: Path, args) -> None:
    d, layers, heads, vocab, B, T = PRESETS[name]
    if args.B:
        B = args.B
    loop = Loop(args, d, layers, heads, max(vocab, VOCAB), T)
    sources = batch_sources(root, B, T, args.device)
    styles = {"every": 1, f"every {args.read_every}": args.read_every}
    for batches in sources.values():  # warm up: compile, workers, page cache
        for _ in range(args.warmup):
            loop.step(*next(batches)).item()
    print(
        f"\npreset {name}: GPT {loop.params / 1e6:.1f} M parameters (d={d}, {layers} layers, {heads} heads, vocab "
        f"{max(vocab, VOCAB):,}), B={B} T={T}; {args.rounds} rounds x {args.steps} steps per contender and style"
    )
    for style, read_every in styles.items():
        rates = {n: [] for n in sources}
        waits = {n: [] for n in sources}
        for _ in range(args.rounds):
            for n, batches in sources.items():
                seconds, w = loop.run(batches, args.steps, read_every)
                rates[n].append(B * T * args.steps / seconds)
                waits[n].extend(w)
        print(f"loss read {style}:")
        for n in sources:
            ratio = spread([r / lim for r, lim in zip(rates[n], rates["limit"])], ".3f")
            print(
                f"  {n:10s} {statistics.median(rates[n]):12,.0f} tokens/s  {ratio:>30s} of the limit | "
                f"main-thread wait {statistics.median(waits[n]) * 1e6:8.1f} us/batch"
            )
    print(same_batches(sources, ("resident", "in-loop", "prefetch"), count=16))


def same_batches(sources: dict, names: tuple[str, ...], count: int) -> str:
    """Whether the paths read so far in step (same seed, same batches taken) give the same next `count` batches."""
    got = {n: [next(sources[n]) for _ in range(count)] for n in names}
    first, *rest = names
    same = all(
        torch.equal(a.cpu(), b.cpu()) for n in rest for pa, pb in zip(got[first], got[n]) for a, b in zip(pa, pb)
    )
    devices = sorted({str(t.device) for n in names for t in got[n][0]})
    return f"next {count} batches of {', '.join(names)} (on {', '.join(devices)}): {'identical' if same else 'DIFFER'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", nargs="+", choices=sorted(PRESETS), default=["small", "gpt2"], help="default: both")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="default: cuda if any")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast (default fp32)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (as GPU training would)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per contender, style and round (default 40)")
    ap.add_argument("--read-every", type=int, default=20, help="the second loop style reads the loss every N steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per contender first (default 5)")
    ap.add_argument("--B", type=int, default=None, help="override the preset's batch size (a CPU run: smaller)")
    ap.add_argument("--tokens", type=int, default=5_000_000, help="tokens per synthetic source (default 5M)")
    args = ap.parse_args()
    args.device = torch.device(args.device)
    if args.device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    print(
        f"{args.device} ({torch.cuda.get_device_name() if args.device.type == 'cuda' else torch.get_num_threads()}"
        f"{'' if args.device.type == 'cuda' else ' threads'}), torch {torch.__version__}, {args.dtype}"
        f"{', compiled' if args.compile else ''}"
    )
    with tempfile.TemporaryDirectory(prefix="bench_train_wait_") as tmp:
        for k, name in enumerate(MIX):
            write_shards(Path(tmp) / name, [args.tokens], seed=k)
        for name in args.preset:
            run_preset(name, Path(tmp), args)


if __name__ == "__main__":
    main()
