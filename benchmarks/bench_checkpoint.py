"""The cost of a streamed pretrain build's checkpoints (pretrain/resume.py, data/resumable.py).

Text: `benchmarks/corpus.py`'s English prose cut into documents of about --doc-chars characters (fineweb-edu's
are a few thousand), written as parquet files in fineweb-edu's columns, read as a local streamed source
(demo=true) through the build's own code path with the default 10,000-document shuffle buffer.

(a) One checkpoint of a full buffer: the stream is read until its buffer was permuted once (9,999 rows
held: the block being yielded and the kept half), then `state()` + `Checkpoint.save` (the Arrow file
and checkpoint.json, both fsynced) is timed against writing the same number of bytes with
`atomic_write_bytes` (the reference: the disk's own cost), interleaved; and loading it back
(`Checkpoint.load` + a ShuffledStream started there, to its first row).

(b) In a build: build_pretrain_source over the same files with a checkpoint every --every tokens against
one whose checkpoints never come due (hub.checkpoint_tokens 10**12: the shards are staged in the
checkpoint folder all the same), interleaved rounds, --workers encoding workers. The difference per
checkpoint is what a checkpoint costs a build: the drained worker pipeline, the state, the writes.

    python -m benchmarks.bench_checkpoint [--docs 12000] [--doc-chars 4000] [--rounds 5] [--every 1000000] \\
        [--workers 2] [--tokenizer PATH]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.corpus import gathered
from benchmarks.encode_limit import english_tokenizer

BUFFER = 10_000  # sources.fineweb_edu.shuffle_buffer's default


def documents(n: int, chars: int) -> list[str]:
    """`n` documents of about `chars` characters from the corpus's paragraphs (cycled if short)."""
    paragraphs = [p for d in gathered(n * chars + 1) for p in d.split("\n\n") if p.strip()]
    docs, doc, it = [], [], itertools.cycle(paragraphs)
    while len(docs) < n:
        doc.append(next(it))
        if sum(map(len, doc)) >= chars:
            docs.append("\n\n".join(doc))
            doc = []
    return docs


def write_files(docs: list[str], folder: Path, n_files: int = 4) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scripts.sample_data.sources import FINEWEB_SCHEMA

    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(docs) // n_files)
    for k in range(n_files):
        part = docs[k * per : (k + 1) * per]
        rows = [
            {
                "text": t,
                "id": f"<urn:uuid:{k}-{i}>",
                "dump": "CC-MAIN-2024-10",
                "url": f"https://example.org/{k}/{i}",
                "date": "2024-02-21T00:00:00Z",
                "file_path": f"s3://commoncrawl/{k}.warc.gz",
                "language": "en",
                "language_score": 0.97,
                "token_count": len(t) // 4,
                "score": 3.1,
                "int_score": 3,
            }
            for i, t in enumerate(part)
        ]
        pq.write_table(pa.Table.from_pylist(rows, schema=FINEWEB_SCHEMA), folder / f"train-{k:05d}.parquet")
    return f"{folder}/*.parquet"


def median_s(times: list[float]) -> str:
    return f"{statistics.median(times) * 1e3:.0f} ms (min {min(times) * 1e3:.0f}, max {max(times) * 1e3:.0f})"


def one_checkpoint(files: str, work: Path, rounds: int) -> None:
    """(a): save and load one checkpoint of a full buffer, against a plain write of as many bytes."""
    import datasets

    from niels_gpt.atomic import atomic_write_bytes
    from niels_gpt.data.hub import HubRead, open_dataset
    from niels_gpt.data.resumable import ShuffledStream
    from niels_gpt.pretrain.resume import Checkpoint

    datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0
    read = HubRead("bench", streaming=True, shuffle=True, shuffle_buffer_size=BUFFER, seed=0, data_files=files)
    ds = open_dataset(read, {})
    stream = ShuffledStream(ds, read)
    rows = iter(stream)
    next(rows)  # the buffer was filled and permuted once: 9,999 rows held
    info, table = stream.state()
    checkpoint = Checkpoint(work / "ckpt", {"bench": 1}, every_tokens=1)
    checkpoint.save({"stream": info}, table)
    size = sum(p.stat().st_size for p in checkpoint.dir.iterdir())
    blob = b"\0" * size
    save, plain, load = [], [], []
    for _ in range(rounds):
        start = time.perf_counter()
        info, table = stream.state()
        checkpoint.save({"stream": info}, table)
        save.append(time.perf_counter() - start)
        start = time.perf_counter()
        atomic_write_bytes(work / "plain.bin", blob)
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        state = Checkpoint(work / "ckpt", {"bench": 1}, every_tokens=1).load()
        again = ShuffledStream(ds, read, start=(state["stream"], state["stream_table"]))
        next(iter(again))
        load.append(time.perf_counter() - start)
    rows.close()
    held = info["block_rows"] + info["buffer_rows"]
    print(
        f"(a) one checkpoint of {held:,} buffered documents ({table.nbytes / 1e6:.1f} MB of Arrow): {size / 1e6:.1f} MB"
    )
    print(f"    save (state + Arrow file + checkpoint.json, fsynced): {median_s(save)}")
    print(f"    reference, atomic_write_bytes of {size / 1e6:.1f} MB: {median_s(plain)}")
    print(f"    ratio save / reference: {statistics.median(s / p for s, p in zip(save, plain)):.2f}x")
    print(f"    load + a stream started there, to its first row: {median_s(load)}")


def in_a_build(files: str, work: Path, tok_path: str, rounds: int, every: int, workers: int) -> None:
    """(b): a build with a checkpoint every `every` tokens against one whose checkpoints never come due."""
    from niels_gpt.config import prepare_config
    from niels_gpt.pretrain import writer
    from niels_gpt.pretrain.job import build_pretrain_source

    saves = []
    writer.log = lambda line: saves.append(line) if line.startswith("checkpoint:") else print(line)

    def run(checkpoint_tokens: int) -> tuple[float, dict]:
        saves.clear()
        cfg = prepare_config(
            {
                "demo": True,
                "sources": {
                    "fineweb_edu": {
                        "demo_data_files": {"train": files},
                        "max_train_tokens": None,
                        "max_val_tokens": None,
                    }
                },
                "hub": {"checkpoint_tokens": checkpoint_tokens},
            }
        )
        start = time.perf_counter()
        meta = build_pretrain_source(
            cfg, "fineweb_edu", tokenizer_path=tok_path, out_dir=work / "build", num_threads=workers, log=lambda s: None
        )
        return time.perf_counter() - start, meta

    times: dict[str, list[float]] = {"never due": [], f"every {every:,} tokens": []}
    run(10**12)  # warm-up: page cache, imports
    for _ in range(rounds):
        for name, tokens in (("never due", 10**12), (f"every {every:,} tokens", every)):
            seconds, meta = run(tokens)
            times[name].append(seconds)
    n_tokens = meta["train_tokens"] + meta["val_tokens"]
    n_ckpt = len(saves)  # of the last build: checkpoints come due only once the batches in flight are written
    base, with_ckpt = (statistics.median(t) for t in times.values())
    print(f"(b) build of {n_tokens:,} tokens, {workers} workers, medians of {rounds} interleaved rounds:")
    for name, t in times.items():
        print(f"    {name}: {median_s(t)}, {n_tokens / statistics.median(t) / 1e6:.2f} M tok/s")
    print(
        f"    {n_ckpt} checkpoints: {(with_ckpt - base) / max(n_ckpt, 1) * 1e3:.0f} ms each "
        f"(ratio of build times {with_ckpt / base:.3f})"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=12_000, help="documents (more than the 10,000 of the buffer)")
    ap.add_argument("--doc-chars", type=int, default=4_000, help="characters per document")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--every", type=int, default=1_000_000, help="tokens between checkpoints in (b)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tokenizer", default=None, help="a niels_gpt SentencePiece model (default: train one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_checkpoint_") as tmp:
        work = Path(tmp)
        docs = documents(args.docs, args.doc_chars)
        files = write_files(docs, work / "files")
        one_checkpoint(files, work, args.rounds)
        tok = english_tokenizer(docs, work, args.tokenizer)
        in_a_build(files, work, tok.model_path, args.rounds, args.every, args.workers)


if __name__ == "__main__":
    main()
