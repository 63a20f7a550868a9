"""The merge of a parted pretrain source: the manifest (`merge_pretrain_parts`) against the copy merge it replaced.

    python -m benchmarks.bench_merge [--parts 4] [--tokens 1000000 10000000 100000000] [--rounds 3]
    python -m benchmarks.bench_merge --build [--build-chars 28000000]   # the whole build: num_parts 4 vs 1

Merge (default): for each size, `--parts` synthetic part caches of that many tokens each (train; val a 40th),
in the exact format a `pretrain_part` job writes (uint16 shards rotating at the default 128 MiB, meta.json with
provenance.part; random ids < 16,004 with an eot every ~1,000 tokens and a budget-cut last document, so every
boundary takes the end_eot path), then in each round, interleaved: the copy merge (the code of format 4, kept
here as the reference: every part shard read in 4 MiB chunks, re-hashed, written into new shards with sha256
on the fly and fsynced) and the manifest merge. Reported per size: wall seconds (median of rounds) and bytes
written (`wchar` of /proc/self/io: bytes handed to write(), so page-cache writes count too). Parts are in the
page cache when the rounds run (they were just written): the copy merge's figure is its best case. Both
merges' token sequences (train + val as PretrainTokenStreamDataset reads them) are hashed and compared once.

Build (`--build`): English prose from this machine (benchmarks/corpus.py) cut into 8 parquet files in
fineweb-edu's columns, a 4,000-piece tokenizer trained on a sample, then fineweb_edu built from them as one
job (`num_parts: 1`) and as 4 part jobs + the merge, each job with 2 encoding workers, one after the other
on this machine; reported: each job's wall seconds, their sum (the node time a cluster pays) and the longest
part + the merge (the wall time with one node per part).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.synthetic import VOCAB
from niels_gpt.atomic import atomic_write_json
from niels_gpt.layout import FORMAT_VERSION, META, SPLITS, part_name, shard_name
from niels_gpt.meta import header, write_meta
from niels_gpt.pretrain.parts import merge_pretrain_parts, part_record
from niels_gpt.pretrain.shards import DEFAULT_SHARD_BYTES, ShardWriter, prepare_out_dir, run_writers
from niels_gpt.shard_list import split_shards
from niels_gpt.token_files import TOKEN_DTYPE, DiskSequence

EOT = 4  # the specials are ids 1..4 (tokenizer/model.py); eot last
DOC_TOKENS = 1_000  # mean document length of the synthetic parts
WRITE_CHUNK = 8_000_000  # tokens generated and written at a time: flat memory at any size
COPY_CHUNK_BYTES = 4 << 20  # the copy merge's read size (format 4)


def quiet(line: str) -> None:
    pass


def wchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


# -- synthetic parts in the format a pretrain_part job writes -----------------------------------------------
def write_part(folder: Path, k: int, n: int, tokens: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = {"train": tokens, "val": max(tokens // 40, 1)}
    shards, docs = {}, {}
    for split, total in counts.items():
        shards[split], docs[split] = [], 0
        per_shard = DEFAULT_SHARD_BYTES // 2
        for i, lo in enumerate(range(0, total, per_shard)):
            path = folder / split / shard_name(i)
            path.parent.mkdir(parents=True, exist_ok=True)
            h, size = hashlib.sha256(), min(per_shard, total - lo)
            with open(path, "wb") as f:
                for c in range(0, size, WRITE_CHUNK):
                    ids = rng.integers(263, VOCAB, min(WRITE_CHUNK, size - c), dtype=np.uint16).astype(TOKEN_DTYPE)
                    ids[rng.random(len(ids)) < 1 / DOC_TOKENS] = EOT
                    if lo + c + len(ids) == total:
                        ids[-1] = 300  # the budget cut the last document: no eot
                    docs[split] += int(np.count_nonzero(ids == EOT))
                    h.update(ids)
                    f.write(ids.tobytes())
            shards[split].append({"file": path.name, "tokens": size, "sha256": h.hexdigest()})
        docs[split] += 1  # the cut last document
    record = part_record(index=k, num_parts=n, seed=0, max_train_tokens=None, max_val_tokens=None)
    meta = header("pretrain", format_version=FORMAT_VERSION, seed=record["part_seed"], tokenizer=None,
                  dataset_name="synthetic", dataset_config=None)  # fmt: skip
    meta.update(tokenizer_sha256="0" * 64, vocab_size=VOCAB, special_token_ids={"eot": EOT}, eot_id=EOT)
    meta.update(
        split_rule="single stream: synthetic", token_dtype="uint16-le", shard_bytes=DEFAULT_SHARD_BYTES,
        max_train_tokens=None, max_val_tokens=None, streaming=True, documents_seen=sum(docs.values()),
        cleaning={"skipped_blank": 0}, provenance={"source": "fineweb_edu", "part": record}, shards=shards,
        **{f"{s}_tokens": counts[s] for s in SPLITS}, **{f"{s}_documents": docs[s] for s in SPLITS},
    )  # fmt: skip
    write_meta(folder / META, meta)


# -- the reference: the copy merge of format 4 -----------------------------------------------------------
def _chunks(split_dir: Path, shards: list[dict]):
    for s in shards:
        h = hashlib.sha256()
        with open(split_dir / s["file"], "rb") as f:
            while data := f.read(COPY_CHUNK_BYTES):
                h.update(data)
                yield np.frombuffer(data, dtype=TOKEN_DTYPE)
        if h.hexdigest() != s["sha256"]:
            raise ValueError(f"{split_dir / s['file']}: sha256 differs from its part's meta.json")


def copy_merge(parts_dir: Path, out: Path, metas: list[dict]) -> None:
    """Format 4's merge: every part's tokens copied, in part order, into new shards at shard_bytes."""
    prepare_out_dir(out)
    writers = {s: ShardWriter(out / s, shard_bytes=DEFAULT_SHARD_BYTES, budget=None) for s in SPLITS}

    def fill() -> dict:
        for split, w in writers.items():
            for k, meta in enumerate(metas):
                followed = any(m[f"{split}_tokens"] for m in metas[k + 1 :])
                held = None  # the last chunk is held back: it may end in a cut document
                for chunk in _chunks(parts_dir / part_name(k) / split, meta["shards"][split]):
                    if held is not None:
                        w.write(held)
                    held = chunk
                if held is not None and followed and held[-1] != EOT:
                    held = held.copy()
                    held[-1] = EOT
                if held is not None:
                    w.write(held)
        return {}

    written = run_writers(writers, fill)
    atomic_write_json(out / META, {"kind": "pretrain", "built": True, "eot_id": EOT, **written})


def sequence_sha(source_dir: Path) -> str:
    h = hashlib.sha256()
    for split in SPLITS:
        for chunk in DiskSequence(split_shards(source_dir, split)).chunks():
            h.update(chunk)
    return h.hexdigest()


def bench_merge(args, tmp: Path) -> list[dict]:
    rows = []
    for tokens in args.tokens:
        source = tmp / f"t{tokens}" / "fineweb_edu"  # the manifest's folder: parts/ inside it, as the rules lay out
        for k in range(args.parts):
            write_part(source / "parts" / part_name(k), k, args.parts, tokens, seed=k)
        metas = [json.loads((source / "parts" / part_name(k) / META).read_text()) for k in range(args.parts)]
        copy_out = tmp / f"t{tokens}" / "copied"
        contenders = {
            "copy": (copy_merge, (source / "parts", copy_out, metas), {}),
            "manifest": (merge_pretrain_parts, (source / "parts", source), {"num_parts": args.parts, "log": quiet}),
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        written: dict[str, list[int]] = {name: [] for name in contenders}
        for _ in range(args.rounds):
            for name, (fn, fn_args, fn_kwargs) in contenders.items():
                before, start = wchar(), time.perf_counter()
                fn(*fn_args, **fn_kwargs)
                times[name].append(time.perf_counter() - start)
                written[name].append(wchar() - before)
        same = sequence_sha(copy_out) == sequence_sha(source)
        row = {"tokens_per_part": tokens, "parts": args.parts, "same_token_sequence": same}
        for name in contenders:
            row[f"{name}_s"] = statistics.median(times[name])
            row[f"{name}_bytes"] = int(statistics.median(written[name]))
        rows.append(row)
        print(
            f"{tokens:>13,} tokens/part x {args.parts}: copy {row['copy_s']:8.3f} s, {row['copy_bytes']:>15,} B "
            f"written | manifest {row['manifest_s'] * 1e3:7.2f} ms, {row['manifest_bytes']:>7,} B written | "
            f"{row['copy_s'] / row['manifest_s']:,.0f}x faster; same token sequence: {same}",
            flush=True,
        )
        shutil.rmtree(tmp / f"t{tokens}")
    return rows


# -- the whole build: num_parts 4 against 1 ----------------------------------------------------------------
def bench_build(args, tmp: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchmarks.corpus import english_documents
    from niels_gpt.config import prepare_config
    from niels_gpt.pretrain.job import build_pretrain_source
    from niels_gpt.tokenizer import train_sentencepiece

    docs, _ = english_documents(args.build_chars)
    files = 8
    for i in range(files):
        rows = docs[i::files]
        (tmp / "data").mkdir(exist_ok=True)
        table = pa.table({"text": rows, "id": [f"d{i}-{j}" for j in range(len(rows))]})
        pq.write_table(table, tmp / "data" / f"train-{i:05d}.parquet")
    tok = tmp / "spm.model"
    train_sentencepiece(docs[: len(docs) // 8], tok, vocab_size=4_000)

    def config(n: int) -> dict:
        return prepare_config(
            {
                "demo": True,
                "pretrain": {"num_parts": n},
                "sources": {
                    "fineweb_edu": {
                        "demo_data_files": {"train": str(tmp / "data" / "*.parquet")},
                        "max_train_tokens": args.build_budget,
                        "max_val_tokens": args.build_budget // 40,
                    }
                },
            }
        )

    def timed(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    one = timed(lambda: build_pretrain_source(config(1), "fineweb_edu", tokenizer_path=tok, out_dir=tmp / "one",
                                              num_threads=2, log=lambda s: None))  # fmt: skip
    parts = [
        timed(
            lambda k=k: build_pretrain_source(
                config(4),
                "fineweb_edu",
                tokenizer_path=tok,
                out_dir=tmp / "four" / "parts" / part_name(k),
                num_threads=2,
                log=lambda s: None,
                num_parts=4,
                part=k,
            )
        )  # fmt: skip
        for k in range(4)
    ]
    merge = timed(lambda: merge_pretrain_parts(tmp / "four" / "parts", tmp / "four", num_parts=4, log=lambda s: None))
    metas = {name: json.loads((tmp / name / META).read_text()) for name in ("one", "four")}
    result = {
        "tokens": {name: [m["train_tokens"], m["val_tokens"]] for name, m in metas.items()},
        "one_job_s": one,
        "part_s": parts,
        "merge_s": merge,
        "parts_sum_s": sum(parts) + merge,
        "parts_wall_one_node_each_s": max(parts) + merge,
    }
    total, wall = result["parts_sum_s"], result["parts_wall_one_node_each_s"]
    print(
        f"num_parts 1: {one:.2f} s ({metas['one']['train_tokens']:,} + {metas['one']['val_tokens']:,} tokens) | "
        f"num_parts 4: parts {', '.join(f'{p:.2f}' for p in parts)} s + merge {merge * 1e3:.1f} ms "
        f"({metas['four']['train_tokens']:,} + {metas['four']['val_tokens']:,} tokens): sum {total:.2f} s "
        f"({total / one:.2f}x), one node per part {wall:.2f} s ({wall / one:.2f}x)",
        flush=True,
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, default=4, help="parts per source (default: 4)")
    ap.add_argument("--tokens", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000],
                    help="train tokens per part, one run each (default: 1M 10M 100M)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per size (default: 3)")
    ap.add_argument("--build", action="store_true", help="time the whole build, num_parts 4 vs 1, instead")
    ap.add_argument("--build-chars", type=int, default=28_000_000, help="English text gathered (default: 28M)")
    ap.add_argument("--build-budget", type=int, default=4_000_000, help="train token budget (default: 4M)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--tmp", type=Path, default=None, help="work folder (default: a new temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        print(f"cpus {os.cpu_count()}, format {FORMAT_VERSION}", flush=True)
        result = bench_build(args, Path(tmp)) if args.build else bench_merge(args, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
