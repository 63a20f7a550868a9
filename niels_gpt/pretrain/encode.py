"""Batched, overlapped tokenization of a document stream for the pretrain writer.

Documents (str or anything with a `.text`, e.g. PretrainSample) are grouped into batches of at most
BATCH_DOCS documents / BATCH_CHARS characters and encoded with one `tokenizer.encode_batch(batch,
num_threads=n)` call (sentencepiece's C++ threads, GIL released). ENCODE_AHEAD worker threads encode
the next batches while the caller's thread reads the input, flattens batch k to uint16 (eot after
every non-empty document) and writes it; input is read at most ENCODE_AHEAD + 1 batches ahead and
memory holds ~ENCODE_AHEAD + 2 batches. Output is identical for any batch size or thread count:
documents are encoded independently and yielded in input order. A blank document (empty or
whitespace-only, `data.normalize.is_blank`) is encoded as no tokens and gets no eot: the writers see
its length 0, skip it and count it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from niels_gpt.data.normalize import is_blank
from niels_gpt.token_files import TOKEN_DTYPE

# Measured on 2 cores (benchmarks/bench_pretrain_build.py): 256 docs / 1 MiB per encode_batch call;
# larger batches were no faster and hold more Python ints in memory.
BATCH_DOCS = 256
BATCH_CHARS = 1 << 20
# Batches encoding in worker threads while the caller flattens and writes: with 2, sentencepiece's C++
# threads always have work while Python holds the GIL (list building, np.fromiter, writes); 1 left
# the cores idle during those phases (~0.89 vs ~0.93 of raw encode_batch on 2 cores).
ENCODE_AHEAD = 2


def text_of(item) -> str:
    text = getattr(item, "text", item)  # str or PretrainSample
    if not isinstance(text, str):
        raise TypeError(f"pretrain input must yield str or PretrainSample, got {type(item).__name__}")
    return text


def text_batches(texts: Iterable, wanted_chars: Callable[[], float]) -> Iterator[list[str]]:
    """Lists of texts of at most BATCH_DOCS docs / ~min(BATCH_CHARS, wanted_chars()) chars (>= 1 doc);
    a blank text is replaced by "" (encoded as no tokens)."""
    it = iter(texts)
    while True:
        cap = min(BATCH_CHARS, wanted_chars())
        batch, chars = [], 0
        for item in it:
            text = text_of(item)
            batch.append("" if is_blank(text) else text)
            chars += len(text)
            if len(batch) >= BATCH_DOCS or chars >= cap:
                break
        if not batch:
            return
        yield batch


def flatten(ids: list[list[int]], eot_id: int) -> tuple[np.ndarray, list[int]]:
    """(flat uint16 ids with eot after every non-empty doc, per-doc token counts without eot)."""
    lens = [len(d) for d in ids]
    total = sum(lens) + sum(1 for n in lens if n)
    eot = [eot_id]
    parts = itertools.chain.from_iterable((d, eot) for d in ids if d)
    return np.fromiter(itertools.chain.from_iterable(parts), dtype=TOKEN_DTYPE, count=total), lens


def encode_docs(tokenizer, batch: list[str], num_threads: int) -> tuple[np.ndarray, list[int]]:
    """One batch, encoded and flattened in the calling thread."""
    return flatten(tokenizer.encode_batch(batch, num_threads=num_threads), tokenizer.eot_id)


def encoded_batches(
    tokenizer, texts: Iterable, wanted_chars, num_threads: int
) -> Iterator[tuple[np.ndarray, list[int]]]:
    """`encode_docs` of every batch, in input order, with ENCODE_AHEAD batches encoding in worker
    threads while the caller flattens and writes the current one."""
    batches = text_batches(texts, wanted_chars)
    with concurrent.futures.ThreadPoolExecutor(max_workers=ENCODE_AHEAD, thread_name_prefix="spm-encode") as pool:
        pending = collections.deque(
            pool.submit(tokenizer.encode_batch, batch, num_threads=num_threads)
            for batch in itertools.islice(batches, ENCODE_AHEAD)
        )
        while pending:
            ids = pending.popleft().result()
            batch = next(batches, None)  # keep ENCODE_AHEAD batches encoding
            if batch is not None:
                pending.append(pool.submit(tokenizer.encode_batch, batch, num_threads=num_threads))
            yield flatten(ids, tokenizer.eot_id)
