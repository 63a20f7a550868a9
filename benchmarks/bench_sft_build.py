"""SFT cache build on realistic English chat text: throughput against SentencePiece's own limit.

Chats: `benchmarks/corpus.py` turns --chars of English prose gathered on this machine into chat examples
(a system line in 30 %, 1-3 user/assistant turns, replies of 1-3 paragraphs). Tokenizer: 16,000 pieces
trained here on a quarter of that prose (or --tokenizer).

The references (benchmarks/encode_limit.py: encode_batch, Pool(2) encode, Pool(2) count) encode the
chats' message contents, in the batches the writer renders (writer.ENCODE_BATCH examples per batch).
Contender: build_sft_cache(chats, num_threads=2, val_frac=0.1, t_max=1024, truncation head): render
with the template, split, drop, write tokens + offsets + meta.json; its workers' start-up is inside the
clock. The chats are repeated --repeat times (3: ~15 M content tokens) so that the build's fixed costs
(starting its workers, the final fsync and meta.json) weigh what they weigh in a real build. Rates count
content tokens (the role and eot ids the template adds are not counted).

    python -m benchmarks.bench_sft_build [--chars 20000000] [--repeat 3] [--rounds 5] [--workers 2] [--tokenizer PATH]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.corpus import chats, gathered
from benchmarks.encode_limit import build_arguments, compare, english_tokenizer, with_workers_cpu
from niels_gpt.sft import writer as sft_writer


def build(tok, examples, out: Path, workers: int) -> None:
    sft_writer.build_sft_cache(
        examples, str(out), tokenizer=tok, val_frac=0.1, seed=0, t_max=1024, truncation="head", num_threads=workers
    )


def main() -> None:
    ap = build_arguments(__doc__, repeated="chats")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_sft_build_") as tmp:
        tmp = Path(tmp)
        docs = gathered(args.chars)
        tok = english_tokenizer(docs, tmp, args.tokenizer)
        examples = chats(docs) * args.repeat
        step = sft_writer.ENCODE_BATCH
        batches = [
            [m["content"] for chat in examples[i : i + step] for m in chat] for i in range(0, len(examples), step)
        ]
        n_tokens = sum(len(ids) for batch in batches for ids in tok.encode_batch(batch))
        n_messages = sum(map(len, batches))
        print(f"{len(examples):,} chats, {n_messages:,} messages, {n_tokens:,} content tokens; {tok!r}")
        build_once = with_workers_cpu(lambda: build(tok, examples, tmp / "sft", args.workers))
        compare(tok, batches, n_tokens, {"build_sft_cache": build_once}, args.rounds, args.workers)


if __name__ == "__main__":
    main()
