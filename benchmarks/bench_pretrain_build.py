"""Pretrain cache build: throughput against raw SentencePiece encoding, and peak RSS against the budget.

(a) Throughput. Reference: `encode_batch` of the same documents with every core and nothing written
(the whole pool in one call, and in 256-document batches; the best of the two counts). Candidates:
`build_pretrain_cache` over the same documents (single-stream rule, unlimited budgets, shards
written) with the overlapped pipeline it ships (`batch_encode.encoded_batches`) and with a serial one
(read, encode, write, in turn); from the in-memory list, and from a loader-like generator
(normalize_text + PretrainSample per document, what the real loaders add on the reading side);
--batch-docs sweeps the batch size (4 KiB of text per document cap). Rates are document tokens (eot
excluded) per wall second and per CPU second of the process (all threads: the CPU ratio is the
build's overhead and holds up when the shared machine is busy, the wall ratio does not). Reference
and candidates are interleaved over several rounds in one process; per-round ratios, medians.

(b) Memory. Each budget is built in a fresh subprocess from an endless stream (the document pool,
cycled) that reports its own peak RSS (VmHWM: Linux carries ru_maxrss over from the parent through
fork+exec); budget 0 is the fixed cost of the imports and the tokenizer. Flat = the same peak for
10 M and 100 M tokens.

Documents come from a seeded generator of pseudo-words (no hub); the tokenizer is
cache/tokenizer/spm.model if it exists, else one trained here on generated text (16,000 pieces).

    python -m benchmarks.bench_pretrain_build [--rounds 5] [--docs 3000] [--batch-docs 256 1024] \\
        [--budgets 10000000 100000000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import peak_rss_mb
from niels_gpt.data.normalize import normalize_text
from niels_gpt.data.types import PretrainSample
from niels_gpt.pretrain import encode as batch_encode
from niels_gpt.pretrain import writer as pretrain_writer
from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece

SYLLABLES = (
    "ka lo mi ne ru sa te vi do pa re shi an el or um ist ing tion ber gar lin mon pel qua ros tur wen zor".split()
)
PROJECT_TOKENIZER = Path("cache/tokenizer/spm.model")


def documents(n: int, seed: int = 0) -> list[str]:
    """n documents of 50-1,500 Zipf-distributed pseudo-words with sentences and line breaks (~4.4 KB each)."""
    rng = random.Random(seed)
    words = set()
    while len(words) < 30_000:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    vocab = sorted(words)
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))
    docs = []
    for _ in range(n):
        out = []
        for w in rng.choices(vocab, cum_weights=cum, k=rng.randint(50, 1500)):
            out.append(w)
            out.append(". " if rng.random() < 0.07 else ("\n" if rng.random() < 0.01 else " "))
        docs.append("".join(out))
    return docs


def tokenizer_for(workdir: Path) -> SentencePieceTokenizer:
    if PROJECT_TOKENIZER.exists():
        return SentencePieceTokenizer(PROJECT_TOKENIZER)
    return train_sentencepiece(documents(2000, seed=99), workdir / "spm.model", vocab_size=16_000, num_threads=2)


def loader_like(docs: list[str]):
    """The documents as the loaders yield them: normalize_text + PretrainSample, one at a time."""
    for i, text in enumerate(docs):
        yield PretrainSample(normalize_text(text), "bench", {"index": i})


def serial_encoded_batches(tokenizer, texts, wanted_chars, num_threads):
    """The pipeline without overlap: read a batch, encode it, hand it over, repeat."""
    for batch in batch_encode.text_batches(texts, wanted_chars):
        yield batch_encode.encode_docs(tokenizer, batch, num_threads)


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, every thread included) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def raw_encode(tok, docs) -> tuple[float, float]:
    """Best of: the whole pool in one encode_batch call, and 256-document calls (every core, nothing kept)."""
    whole = timed(lambda: tok.encode_batch(docs, num_threads=-1))
    batched = timed(lambda: [tok.encode_batch(docs[i : i + 256], num_threads=-1) for i in range(0, len(docs), 256)])
    return min(whole, batched)


def build(tok, docs, out: Path, pipeline, batch_docs: int = batch_encode.BATCH_DOCS) -> tuple[float, float]:
    """One build with `pipeline` and batches of `batch_docs` documents (4 KiB of text per document cap)."""
    original = pretrain_writer.encoded_batches, batch_encode.BATCH_DOCS, batch_encode.BATCH_CHARS
    pretrain_writer.encoded_batches = pipeline
    batch_encode.BATCH_DOCS, batch_encode.BATCH_CHARS = batch_docs, batch_docs * 4096
    try:
        return timed(
            lambda: pretrain_writer.build_pretrain_cache(
                docs,
                str(out),
                tokenizer=tok,
                max_train_tokens=None,
                max_val_tokens=None,
                seed=0,
                shuffle_buffer=None,
                val_doc_prob=0.025,
                num_threads=-1,
            )
        )
    finally:
        pretrain_writer.encoded_batches, batch_encode.BATCH_DOCS, batch_encode.BATCH_CHARS = original


def child(args) -> None:
    """One build from an endless stream; prints JSON with the peak RSS of this process."""
    tok = SentencePieceTokenizer(args.tokenizer)
    pool = documents(args.docs, seed=1)
    start = time.perf_counter()
    meta = pretrain_writer.build_pretrain_cache(
        itertools.cycle(pool),
        args.out,
        tokenizer=tok,
        max_train_tokens=args.child,
        max_val_tokens=args.child // 40,
        seed=0,
        shuffle_buffer=None,
        val_doc_prob=0.025,
    )
    seconds = time.perf_counter() - start
    rss_mb = peak_rss_mb()
    print(
        json.dumps(
            {
                "tokens": meta["train_tokens"] + meta["val_tokens"],
                "seconds": seconds,
                "rss_mb": rss_mb,
                "shards": len(meta["shards"]["train"]) + len(meta["shards"]["val"]),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--docs", type=int, default=3000, help="documents in the pool (~4.4 KB each)")
    ap.add_argument("--batch-docs", type=int, nargs="+", default=[256], help="documents per encode_batch call")
    ap.add_argument("--budgets", type=int, nargs="*", default=[10_000_000, 100_000_000], help="train budgets for RSS")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tokenizer", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return child(args)

    with tempfile.TemporaryDirectory(prefix="bench_pretrain_build_") as tmp:
        tmp = Path(tmp)
        tok = tokenizer_for(tmp)
        docs = documents(args.docs, seed=1)
        n_tokens = sum(len(d) for d in tok.encode_batch(docs))
        print(
            f"tokenizer {tok!r}; {len(docs):,} documents, {sum(map(len, docs)) / 1e6:.1f} M chars, {n_tokens:,} tokens"
        )
        candidates = {"raw encode_batch": lambda: raw_encode(tok, docs)}
        for k in args.batch_docs:
            for label, pipeline in (("overlapped", batch_encode.encoded_batches), ("serial", serial_encoded_batches)):
                candidates[f"build {label} {k}"] = lambda k=k, p=pipeline: build(tok, docs, tmp / "a", p, k)
                candidates[f"build {label} {k} loader"] = lambda k=k, p=pipeline: build(
                    tok, loader_like(docs), tmp / "a", p, k
                )
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in candidates}
        for _ in range(args.rounds):
            for name, run in candidates.items():
                runs[name].append(run())
        raw_wall = [w for w, _ in runs["raw encode_batch"]]
        raw_cpu = [c for _, c in runs["raw encode_batch"]]
        for name, values in runs.items():
            wall = statistics.median(n_tokens / w for w, _ in values)
            cpu = statistics.median(n_tokens / c for _, c in values)
            ratio = statistics.median(rw / w for (w, _), rw in zip(values, raw_wall))
            cpu_ratio = statistics.median(rc / c for (_, c), rc in zip(values, raw_cpu))
            print(
                f"{name:28s} {wall / 1e6:6.2f} M tokens/s wall (ratio to raw {ratio:4.2f}) | "
                f"{cpu / 1e6:6.2f} M tokens per CPU-second (ratio to raw {cpu_ratio:4.2f})"
            )

        tok_path = str(tok.model_path)
        for budget in [0, *args.budgets]:
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.bench_pretrain_build",
                "--child",
                str(budget),
                "--tokenizer",
                tok_path,
                "--docs",
                str(args.docs),
                "--out",
                str(tmp / f"rss_{budget}"),
            ]
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            print(
                f"budget {budget:>13,} train tokens: {res['tokens']:>13,} train+val written "
                f"in {res['shards']} shard(s), "
                f"{res['seconds']:6.1f} s ({res['tokens'] / max(res['seconds'], 1e-9) / 1e6:5.2f} M tokens/s), "
                f"peak RSS {res['rss_mb']:7.1f} MB"
            )
            subprocess.run(["rm", "-rf", str(tmp / f"rss_{budget}")], check=True)


if __name__ == "__main__":
    main()
