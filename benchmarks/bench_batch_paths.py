"""Main-thread time per batch of every way to feed a training loop, on the CPU (one torch thread).

Data: three synthetic pretrain sources (benchmarks/synthetic.py) mixed 0.6/0.1/0.3, two shards each. Two
presets: `small` (a 6 x 384 GPT: B=64, T=256; GPU step ~9.5 ms) and `gpt2` (GPT-2 small: B=32, T=1024;
GPU step ~56 ms). The loop between two batches sleeps for --step-ms (default: the preset's GPU step), as a
loop waiting on the GPU does (the GIL is free meanwhile), so background producers get their time. Contenders:
  torch gather       the reference: B rows gathered from the three sources' ids held in memory as one int64
                     tensor, `flat[starts[:, None] + arange(T + 1)]` (x, y views; starts from one randint);
  index_select       the strict reference: one index_select of that tensor's (n - T, T+1) unfold view;
  host random/epoch  `next(MixedLoader(...))` over the memory-mapped caches (the default); "dict": and its
                     `as_dict()` (the dict batch a DataLoader recipe hands out, made in the loop); "ramp": under a
                     schedule whose weights change every step (RAMP; absent before schedules);
  resident r/e       the same with `resident=True` (the caches in the device's memory, here the CPU's);
  prefetch           `next(prefetch(MixedLoader(mode="epoch"), "cpu", depth=2))`: a background thread;
  DataLoader         README's recipe: `DataLoader(MixedBatches(mode="epoch"), batch_size=None, num_workers=2)`
                     (pin_memory only with CUDA), dict batches handed over as compact bytes (handover.py);
  DataLoader 1-buffer  the same batches sent as one shared-memory tensor per batch (as_dict(one_buffer=True)),
                     the handover before the compact bytes;
  DataLoader per-field  the same batches cloned field by field in the worker: one shared-memory tensor per
                     field, the first handover;
  DataLoader floor   a DataLoader (2 workers) whose items are the int 0: its own queues and bookkeeping, what
                     no dataset can go below;
  nanoGPT            nanoGPT's `get_batch`: re-open the memmap, B slices, astype, torch.stack;
  before ...         with `--before REV`: the host loaders of niels_gpt as of git revision REV, imported beside
                     this tree under another name (bench_full_build.package_at), timed in the same rounds.
`--only WORD ...` keeps the contenders whose name holds one of the words (the torch gather always). After the
rounds: the bytes of each host loader's state (JSON), and with `--replay N` the seconds `load_state_dict` takes to
replay N batches (its ledger check) in each mode, fixed weights and on a ramp.
Per batch: `wait` = wall time inside next() / the call (what the loop waits for), `thread` = CPU time of the
main thread inside next() (what the thread that launches the GPU's kernels spends), `cpu` = CPU time of the whole
process over the round divided by its batches (main thread + any producer, queue-feeder or pin-memory thread of
this process; the DataLoader's worker processes are not counted). Contenders interleaved in every round; medians
over rounds, and per-round ratios of the host loader's wait to the torch gather's.

    python -m benchmarks.bench_batch_paths [--preset small gpt2] [--rounds 5] [--batches 40] [--step-ms X] \
        [--before REV] [--only host] [--replay 100000]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from benchmarks.synthetic import write_shards
from benchmarks.timing import spread
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.training.batch_dict import as_dict
from niels_gpt.training.mixture import MixedBatches
from niels_gpt.training.prefetch import prefetch

MIX = {"fineweb_edu": 0.6, "gutenberg": 0.1, "wikitext": 0.3}
RAMP = [(0, MIX), (10**6, {"fineweb_edu": 0.2, "gutenberg": 0.5, "wikitext": 0.3})]  # a new mixture each step
SHARDS = [3_000_000, 1_000_000]  # tokens per shard, two shards per source: 24 MB of ids in all
PRESETS = {"small": (64, 256, 9.5), "gpt2": (32, 1024, 56.0)}  # B, T, GPU step (ms) measured on an H100


def reference_gather(root: Path, B: int, T: int):
    """The two in-memory torch references over the sources' ids as one int64 tensor."""
    flat = torch.from_numpy(
        np.concatenate([np.fromfile(p, dtype=np.uint16) for name in MIX for p in sorted((root / name).glob("*.bin"))])
    ).to(torch.int64)
    windows, offsets = flat.unfold(0, T + 1, 1), torch.arange(T + 1)
    g = torch.Generator().manual_seed(0)

    def gather():
        rows = flat[torch.randint(0, len(windows), (B,), generator=g)[:, None] + offsets]
        return rows[:, :-1], rows[:, 1:]

    def index_select():
        rows = windows.index_select(0, torch.randint(0, len(windows), (B,), generator=g))
        return rows[:, :-1], rows[:, 1:]

    return gather, index_select


def nanogpt_get_batch(paths: list[Path], B: int, T: int):
    g = torch.Generator().manual_seed(0)

    def get_batch():
        data = np.memmap(paths[int(torch.randint(len(paths), (1,), generator=g))], dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - T, (B,), generator=g)
        x = torch.stack([torch.from_numpy(data[i : i + T].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + T].astype(np.int64)) for i in ix])
        return x, y

    return get_batch


class Zeros(IterableDataset):
    """Endless 0s: the DataLoader's own cost per item (the floor of every DataLoader contender)."""

    def __iter__(self):
        while True:
            yield 0


class PerField(IterableDataset):
    """A MixedBatches' batches with one tensor (one shared-memory block) per field (`one_buffer=False`, the
    first handover) or one for the whole batch (`one_buffer=True`, the second)."""

    def __init__(self, batches, one_buffer: bool = False):
        self.batches, self.one_buffer = batches, one_buffer

    def __iter__(self):
        dicts = self.batches.batches(handover=False) if hasattr(self.batches, "batches") else self.batches
        for batch in dicts:
            if self.one_buffer:
                yield as_dict(batch["input_ids"], batch["shift_labels"], one_buffer=True)
            else:
                yield {key: value.clone() for key, value in batch.items()}


def open_loader(root: str, *, T: int, resident: bool = False, p=None, **mixing) -> MixedLoader:
    """MixedLoader over the synthetic sources in `root` (a module-level function: workers unpickle it)."""
    sources = {name: PretrainTokenStreamDataset(Path(root) / name, T=T) for name in MIX}
    loader = MixedLoader(sources, p=MIX if p is None else p, **mixing)
    return loader.made_resident() if resident else loader  # the openers' resident=True


def open_before(package: str, root: str, *, T: int, p=None, **mixing):
    """open_loader with the MixedLoader and PretrainTokenStreamDataset of `package` (an older niels_gpt)."""
    loader = importlib.import_module(f"{package}.training.loader")
    dataset = importlib.import_module(f"{package}.pretrain.dataset")
    sources = {name: dataset.PretrainTokenStreamDataset(Path(root) / name, T=T) for name in MIX}
    return loader.MixedLoader(sources, p=MIX if p is None else p, **mixing)


def contenders(root: Path, B: int, T: int, before: str | None = None) -> dict:
    """{name: a callable returning the next batch}; iterators are created once and kept."""
    kw = {"T": T, "B": B, "seed": 0}
    gather, index_select = reference_gather(root, B, T)
    out = {"torch gather": gather, "index_select": index_select}
    opens = {"host": partial(open_loader, root)}
    if before:
        opens["before host"] = partial(open_before, before, str(root))
    for label, open_ in opens.items():
        for mode in ("random", "epoch"):
            out[f"{label} {mode}"] = open_(mode=mode, **kw).__next__
        try:  # every step on a ramp (a schedule's weights change each step)
            for mode in ("random", "epoch"):
                out[f"{label} {mode} ramp"] = open_(mode=mode, p=RAMP, **kw).__next__
        except (AttributeError, TypeError, ValueError):  # a niels_gpt before schedules
            pass
    try:
        for mode in ("random", "epoch"):
            out[f"resident {mode}"] = open_loader(root, mode=mode, resident=True, **kw).__next__
    except AttributeError:  # a niels_gpt before resident=True
        pass
    epoch_dicts = open_loader(root, mode="epoch", **kw)  # the loop making the DataLoader's dict batches itself
    out["host epoch dict"] = lambda: next(epoch_dicts).as_dict()
    out["prefetch epoch"] = prefetch(open_loader(root, mode="epoch", **kw), "cpu", depth=2).__next__
    mix = MixedBatches(partial(open_loader, str(root), mode="epoch", **kw))
    pin = torch.cuda.is_available()
    loader = DataLoader(mix, batch_size=None, num_workers=2, pin_memory=pin)
    out["DataLoader epoch"] = iter(loader).__next__
    for name, one_buffer in (("1-buffer", True), ("per-field", False)):
        other = DataLoader(PerField(mix, one_buffer), batch_size=None, num_workers=2, pin_memory=pin)
        out[f"DataLoader {name}"] = iter(other).__next__
    out["DataLoader floor"] = iter(DataLoader(Zeros(), batch_size=None, num_workers=2)).__next__
    out["nanoGPT get_batch"] = nanogpt_get_batch(sorted((root / "fineweb_edu").glob("*.bin")), B, T)
    return out


def _send_batches(queue, make, count: int, done) -> None:
    """A child process: `count` batches of `make()` into `queue` (torch's shared-memory pickling), then it
    stays until `done` (the receiver fetches each block's file descriptor from it)."""
    for _ in range(count):
        queue.put(make())
    done.wait()


def handover(B: int, T: int, count: int = 200, rounds: int = 3) -> dict[str, tuple[float, float]]:
    """{way: (median wall us, main-process CPU us)} to receive one dict batch from another process through a
    torch.multiprocessing queue (what a DataLoader worker's batch costs the main process before the
    DataLoader's own bookkeeping), each get after a 2 ms pause (the sender is ahead, as a worker is): one
    shared-memory tensor per field, one for the whole batch (as_dict(one_buffer=True)), and the compact bytes
    of handover.Handover (uint16 ids in one bytes object, unpickled into the dict batch). Interleaved rounds."""
    import torch.multiprocessing as mp

    from niels_gpt.training.handover import Handover

    rows = torch.randint(0, 16_000, (B, T + 1))
    x, y = rows[:, :-1], rows[:, 1:]
    makers = {
        "per field": partial(as_dict, x, y),
        "one buffer": partial(as_dict, x, y, one_buffer=True),
        "compact bytes": partial(Handover, (x, y, None, None, None), -100),
    }
    walls, cpus = {name: [] for name in makers}, {name: [] for name in makers}
    ctx = mp.get_context("fork")
    for _ in range(rounds):
        for name, make in makers.items():
            queue, done = ctx.Queue(maxsize=8), ctx.Event()
            child = ctx.Process(target=_send_batches, args=(queue, make, count + 10, done))
            child.start()
            for _ in range(10):
                queue.get()
            waits, cpu0 = [], time.process_time()
            for _ in range(count):
                time.sleep(0.002)
                start = time.perf_counter()
                queue.get()
                waits.append(time.perf_counter() - start)
            cpus[name].append((time.process_time() - cpu0) / count * 1e6)
            walls[name].append(statistics.median(waits) * 1e6)
            done.set()
            child.join()
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in makers}


def one_round(fn, batches: int, step_s: float) -> tuple[float, float, float]:
    """(median wall seconds inside fn(), median main-thread CPU seconds inside fn(), process CPU seconds per
    batch) over `batches` calls, each after a simulated step of `step_s` seconds of sleep."""
    waits, threads = [], []
    cpu0 = time.process_time()
    for _ in range(batches):
        if step_s:
            time.sleep(step_s)
        start, thread0 = time.perf_counter(), time.thread_time()
        fn()
        waits.append(time.perf_counter() - start)
        threads.append(time.thread_time() - thread0)
    return statistics.median(waits), statistics.median(threads), (time.process_time() - cpu0) / batches


def run_preset(name: str, root: Path, args, before: str | None) -> None:
    B, T, gpu_step_ms = PRESETS[name]
    step_ms = gpu_step_ms if args.step_ms is None else args.step_ms
    fns = contenders(root, B, T, before)
    if args.only:
        fns = {n: fn for n, fn in fns.items() if n == "torch gather" or any(w in n for w in args.only)}
    for fn in fns.values():  # warm up: workers started, page cache and plans filled
        for _ in range(5):
            fn()
    waits, threads, cpus = ({n: [] for n in fns} for _ in range(3))
    for _ in range(args.rounds):
        for n, fn in fns.items():
            wait, thread, cpu = one_round(fn, args.batches, step_ms / 1e3)
            waits[n].append(wait)
            threads[n].append(thread)
            cpus[n].append(cpu)
    print(f"\npreset {name}: B={B} T={T}, simulated step {step_ms} ms, {args.rounds} rounds x {args.batches} batches")
    print(f"{'contender':18s} {'wait us':>9s} {'thread us':>10s} {'cpu us/batch':>13s} {'wait / torch gather':>24s}")
    for n in fns:
        ratio = spread([w / r for w, r in zip(waits[n], waits["torch gather"])])
        wait, thread = statistics.median(waits[n]) * 1e6, statistics.median(threads[n]) * 1e6
        print(f"{n:18s} {wait:9.1f} {thread:10.1f} {statistics.median(cpus[n]) * 1e6:13.1f} {ratio:>24s}")
    if before:
        for n in fns:
            if n.startswith("host ") and f"before {n}" in fns:
                change = spread([a / b for a, b in zip(waits[n], waits[f"before {n}"])])
                print(f"{n:18s} wait / before: {change}")
    for n, fn in fns.items():
        loader = getattr(fn, "__self__", None)
        if hasattr(loader, "state_dict"):
            print(f"{n:18s} state at batch {loader.step:,}: {len(json.dumps(loader.state_dict())):,} bytes (JSON)")
    try:
        costs = "; ".join(f"{name} {wall:.0f} / {cpu:.0f} us" for name, (wall, cpu) in handover(B, T).items())
        print(f"handover of one dict batch from another process, wait / main-process CPU per batch: {costs}")
    except (TypeError, ImportError):  # a niels_gpt before one_buffer or the compact handover
        pass


def replay_times(root: Path, preset: str, batches: int) -> None:
    """Seconds `load_state_dict` takes for a state saved after `batches` batches (its ledger check replays them)."""
    B, T, _ = PRESETS[preset]
    for mode in ("random", "epoch"):
        for label, p in (("fixed", MIX), ("ramp", RAMP)):
            saver = open_loader(str(root), T=T, B=B, seed=0, mode=mode, p=p)
            saver.skip(batches)
            state = saver.state_dict()
            loader = open_loader(str(root), T=T, B=B, seed=0, mode=mode, p=p)
            start = time.perf_counter()
            loader.load_state_dict(state)
            seconds = time.perf_counter() - start
            per = seconds / batches * 1e6
            print(
                f"replay {mode} {label}: {batches:,} batches in {seconds:.2f} s ({per:.1f} us a batch, {per:.0f} s per "
                f"10^6); state {len(json.dumps(state)):,} bytes"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", nargs="+", choices=sorted(PRESETS), default=["small", "gpt2"], help="default: both")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--batches", type=int, default=30, help="batches per contender per round (default 30)")
    ap.add_argument("--step-ms", type=float, default=None, help="simulated step (default: the preset's GPU step)")
    ap.add_argument("--before", default=None, help="also time the host loaders as of this git revision (default: no)")
    ap.add_argument("--only", nargs="+", default=None, help="contenders whose name holds one of these words (all)")
    ap.add_argument("--replay", type=int, default=0, help="time load_state_dict's replay of N batches (default 0)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="bench_batch_paths_") as tmp:
        root = Path(tmp)
        for k, name in enumerate(MIX):
            write_shards(root / name, SHARDS, seed=k)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; sources {MIX}, {len(SHARDS)} shards each")
        before = None
        if args.before:
            from benchmarks.bench_full_build import package_at

            before = package_at(args.before, Path(tmp))
        for name in args.preset:
            run_preset(name, root, args, before)
            if args.replay:
                replay_times(root, name, args.replay)


if __name__ == "__main__":
    main()
