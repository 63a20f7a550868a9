"""The leakage audit's val side: bytes allocated per val position while every val split of a space is read,
hashed (`leakage._val_side`) and indexed (`leakage._index`), on the caches of a real build (e.g. a
`bench_full_build` run's cache/), as of now and as of `--before` (that revision's package first on
PYTHONPATH), each in its own process, alternating.

Memory is counted with tracemalloc (numpy reports its buffers to it): the peak while the val side is
built, and what is still held once it is indexed. The keys found for every val n-gram (`key_of`) are
compared between versions (sha256).

    python -m benchmarks.bench_leakage_val CACHE_DIR [--space tokens] [--before REV] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import hashlib, json, sys, tracemalloc
import numpy as np
from niels_gpt.report import leakage
from niels_gpt.report.corpora import find_splits
cache, space = sys.argv[1:3]
n = 13 if space == "tokens" else 50
splits, _ = find_splits(cache)
vals = [s for s in splits if s.space == space and s.split == "val"]
tracemalloc.start()
sides = [leakage._val_side(s, n) for s in vals]
leakage._index(sides)
held, peak = tracemalloc.get_traced_memory()
positions = sum(len(s.data) for s in sides)
keys = np.concatenate([np.zeros(0, np.intp)] + [s.key_of for s in sides])
print(json.dumps({"module": leakage.__file__, "positions": positions, "peak": peak, "held": held,
                  "key_of": hashlib.sha256(keys.tobytes()).hexdigest()}))
"""


def package_at(rev: str, dest: Path) -> Path:
    """The niels_gpt package as of `rev`, extracted under `dest`."""
    archive = subprocess.run(["git", "archive", rev, "niels_gpt"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def measure(cache: str, space: str, pythonpath: str | None) -> dict:
    env = None if pythonpath is None else {**os.environ, "PYTHONPATH": pythonpath}
    proc = subprocess.run(  # run outside the repository: its folder would come before PYTHONPATH
        [sys.executable, "-c", CHILD, str(Path(cache).resolve()), space],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache", help="a built cache folder (the val splits' caches)")
    ap.add_argument("--space", choices=("tokens", "bytes"), default="tokens")
    ap.add_argument("--before", default=None, help="also measure as of this git revision")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        versions = {"now": None}
        if args.before:
            versions[args.before] = str(package_at(args.before, Path(tmp)))
        results: dict[str, list[dict]] = {name: [] for name in versions}
        for _ in range(args.rounds):
            for name, path in versions.items():
                results[name].append(measure(args.cache, args.space, path))
    for name, runs in results.items():
        r = runs[0]
        peak = sorted(run["peak"] for run in runs)[len(runs) // 2]
        print(
            f"{name:>10} ({r['module']}): {r['positions']:,} val positions; peak {peak / 2**20:,.1f} MiB "
            f"({peak / max(r['positions'], 1):.1f} bytes per position), "
            f"held after indexing {r['held'] / 2**20:,.1f} MiB"
        )
    keys = {run["key_of"] for runs in results.values() for run in runs}
    print(f"key_of identical across versions and rounds: {len(keys) == 1}")


if __name__ == "__main__":
    main()
