"""oasst1 thread reconstruction: linear in the number of messages, against a quadratic reference.

    python -m benchmarks.bench_oasst1 [--rounds 3]

Synthetic forests shaped like oasst1 (trees of 2-40 messages, prompter/assistant alternating,
~3% deleted, ~10% non-English, a few orphans). `reconstruct_threads` is timed at 10k and 100k
messages (ratio ~10 means linear); the reference, which finds a node's children by scanning the
whole record list, is timed at 2.5k and 10k only (at 100k it would take minutes) and its output
is checked equal to the candidate's. Runs are interleaved per round; medians are reported.
The candidate is also timed with the cyclic GC paused ("gc off"): Python's GC rescans the growing
live heap of a 100k build, which adds superlinearity that is not the algorithm's. A calibration
row times a trivially linear pass (one dict + one object per message): on this machine even that
scales ~11-12x from 10k to 100k (caches), so a candidate ratio near it is linear.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

from niels_gpt.data.oasst1 import reconstruct_threads

SIZES = (2_500, 10_000, 100_000)
REFERENCE_SIZES = (2_500, 10_000)


def synthetic_records(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    records: list[dict] = []
    t = 0
    while len(records) < n:
        tree = f"tree{t}"
        size = min(rng.randint(2, 40), n - len(records))
        nodes = [{"message_id": f"{tree}.0", "parent_id": None, "role": "prompter"}]
        for i in range(1, size):
            parent = rng.choice(nodes)
            role = "assistant" if parent["role"] == "prompter" else "prompter"
            nodes.append({"message_id": f"{tree}.{i}", "parent_id": parent["message_id"], "role": role})
        for node in nodes:
            node.update(
                message_tree_id=tree,
                text=f"{node['role']} text {node['message_id']}",
                lang="en" if rng.random() > 0.1 else "de",
                deleted=rng.random() < 0.03,
            )
            if rng.random() < 0.002:
                node["parent_id"] = "missing-parent"
        records += nodes
        t += 1
    return records


def reference_threads(records: list[dict], english_only: bool = True, max_messages: int = 32) -> list[tuple]:
    """The simple way: children of a node by scanning every record; same cut rules."""
    kept = [r for r in records if not r["deleted"] and (not english_only or r.get("lang") == "en")]
    out, seen = [], set()

    def emit(path):
        end = len(path)
        while end and path[end - 1]["role"] != "assistant":
            end -= 1
        ids = tuple(r["message_id"] for r in path[:end])
        if end >= 2 and ids not in seen:
            seen.add(ids)
            out.append(ids)

    def walk(path):
        node = path[-1]
        kids = [r for r in kept if r["parent_id"] == node["message_id"]]  # the quadratic scan
        want = "assistant" if len(path) % 2 == 1 else "prompter"
        valid = [k for k in kids if k["role"] == want] if len(path) < max_messages else []
        if len(valid) < len(kids) or not kids:
            emit(path)
        for k in valid:
            walk(path + [k])

    for r in kept:
        if r["parent_id"] is None and r["role"] == "prompter":
            walk([r])
    return out


def linear_baseline(records: list[dict]) -> list:
    from niels_gpt.data.types import ChatMessage

    msg = {r["message_id"]: r for r in records}
    return [ChatMessage("user", r["text"]) for r in msg.values()]


def _time(fn, gc_off: bool = False) -> tuple[float, object]:
    if gc_off:
        gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, result
    finally:
        gc.enable()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    data = {n: synthetic_records(n) for n in SIZES}
    cand = {n: [] for n in SIZES}
    nogc = {n: [] for n in SIZES}
    base = {n: [] for n in SIZES}
    ref = {n: [] for n in REFERENCE_SIZES}
    for _ in range(args.rounds):
        for n in SIZES:
            rows = data[n]
            secs, out = _time(lambda rows=rows: reconstruct_threads(rows))
            cand[n].append(secs)
            nogc[n].append(_time(lambda rows=rows: reconstruct_threads(rows), gc_off=True)[0])
            base[n].append(_time(lambda rows=rows: linear_baseline(rows), gc_off=True)[0])
            if n in REFERENCE_SIZES:
                rsecs, rout = _time(lambda rows=rows: reference_threads(rows))
                ref[n].append(rsecs)
                assert {tuple(s.meta["message_ids"]) for s in out} == set(rout), f"outputs differ at {n:,}"
    med = {n: statistics.median(v) for n, v in cand.items()}
    med_nogc = {n: statistics.median(v) for n, v in nogc.items()}
    med_base = {n: statistics.median(v) for n, v in base.items()}
    rmed = {n: statistics.median(v) for n, v in ref.items()}
    threads = {n: len(reconstruct_threads(data[n])) for n in SIZES}
    print(f"oasst1 reconstruction, median of {args.rounds} rounds")
    print(f"{'messages':>10} {'threads':>9} {'candidate s':>12} {'gc off s':>9} {'reference s':>12} {'ref/cand':>9}")
    for n in SIZES:
        r = f"{rmed[n]:12.3f} {rmed[n] / med[n]:9.1f}" if n in rmed else f"{'-':>12} {'-':>9}"
        print(f"{n:>10,} {threads[n]:>9,} {med[n]:12.4f} {med_nogc[n]:9.4f} {r}")
    print(
        f"candidate 100k/10k ratio: {med[100_000] / med[10_000]:.1f}, "
        f"gc off {med_nogc[100_000] / med_nogc[10_000]:.1f} (10 = linear)"
    )
    print(
        "linear baseline (dict + object per message, gc off) 100k/10k ratio: "
        f"{med_base[100_000] / med_base[10_000]:.1f}"
    )
    print(f"reference 10k/2.5k ratio: {rmed[10_000] / rmed[2_500]:.1f} (4 = linear, 16 = quadratic)")


if __name__ == "__main__":
    main()
