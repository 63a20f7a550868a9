"""Peak memory of reading a prepared (non-streamed) split row by row: through the `Dataset` (its Arrow cache
file's memory map), `hub.file_rows` (the Dataset opened by `load_dataset`, then plain reads of its file, one
record batch at a time) and `prepared.open_split` (what `hub.open_dataset` now does: the builder's
`download_and_prepare`, then plain reads of the split's files; nothing opens the Dataset), at two split sizes,
each read in its own process, the three ways alternating.

A memory map's pages stay counted in the process's RSS once touched (file-backed, `RssFile`), so walking a
split through the Dataset grows the job's peak with the split (wikitext-103's train split: ~560 MiB at full
size in the pretrain and streams jobs). The figure: peak RSS and its file-backed part per way and size, and
the ratio of the peaks between the sizes (1.0 = flat). The rows of the three ways are compared (sha256).

    python -m benchmarks.bench_prepared_rows [--mib 100 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WAYS = ("dataset", "files", "split")
WORDS = [f"w{k:x}" for k in range(5000)]  # a made-up vocabulary: no third-party text

READER = r"""
import hashlib, json, sys
from datasets import load_dataset, load_dataset_builder
from niels_gpt.data.hub import file_rows
from niels_gpt.data.prepared import open_split
path, cache, way = sys.argv[1:4]
if way == "split":
    builder = load_dataset_builder("parquet", data_files=path, cache_dir=cache)
    builder.download_and_prepare()
    ds = open_split(builder, "train")
else:
    ds = load_dataset("parquet", data_files=path, split="train", cache_dir=cache)
def status(*keys):
    fields = (line.split(":", 1) for line in open("/proc/self/status"))
    return {k: int(v.split()[0]) for k, v in fields if k in keys}
base = status("VmRSS")
rows = {"dataset": lambda: iter(ds), "files": lambda: file_rows(ds), "split": lambda: ds.rows()}[way]()
h, n = hashlib.sha256(), 0
for row in rows:
    h.update(row["text"].encode()); n += 1
end = status("VmHWM", "RssFile", "RssAnon")
print(json.dumps({"rows": n, "sha256": h.hexdigest(), "start_kib": base["VmRSS"], **end}))
"""


def write_split(path: Path, mib: int) -> None:
    """A wikitext-like parquet split of about `mib` MiB of text: lines of 5-80 seeded words, some empty."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    writer, written = None, 0
    while written < mib << 20:
        lengths = rng.integers(0, 80, size=20_000)
        words = rng.integers(0, len(WORDS), size=int(lengths.sum()))
        lines, at = [], 0
        for n in lengths:
            lines.append(" ".join(WORDS[w] for w in words[at : at + n]) + "\n" if n >= 5 else "")
            at += n
        table = pa.table({"text": lines})
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
        written += sum(map(len, lines))
    writer.close()


def read_once(path: Path, cache: Path, way: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", READER, str(path), str(cache), way], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, nargs=2, default=[100, 400], help="the two split sizes (MiB of text)")
    ap.add_argument("--rounds", type=int, default=3, help="reads of each way at each size, alternating")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results: dict[tuple[int, str], list[dict]] = {}
        for mib in args.mib:
            path, cache = Path(tmp) / f"split_{mib}.parquet", Path(tmp) / f"cache_{mib}"
            write_split(path, mib)
            read_once(path, cache, "files")  # prepares the Arrow cache outside the rounds
            for _ in range(args.rounds):
                for way in WAYS:
                    results.setdefault((mib, way), []).append(read_once(path, cache, way))
        print(f"{'split':>8}  {'way':<9} {'peak RSS MiB':>12} {'file-backed MiB':>15} {'anon MiB':>9}  rows")
        peaks = {}
        for (mib, way), runs in results.items():
            peak = statistics.median(r["VmHWM"] for r in runs) / 1024
            peaks[mib, way] = peak
            file_mib = statistics.median(r["RssFile"] for r in runs) / 1024
            anon = statistics.median(r["RssAnon"] for r in runs) / 1024
            print(f"{mib:>5} MiB  {way:<9} {peak:>12.0f} {file_mib:>15.0f} {anon:>9.0f}  {runs[0]['rows']:,}")
        small, large = args.mib
        for way in WAYS:
            print(f"{way}: peak at {large} MiB / at {small} MiB = {peaks[large, way] / peaks[small, way]:.2f}")
        for mib in args.mib:
            same = {r["sha256"] for way in WAYS for r in results[mib, way]}
            print(f"{mib} MiB: rows identical all three ways: {len(same) == 1}")


if __name__ == "__main__":
    main()
