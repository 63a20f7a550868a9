"""Batched, overlapped tokenization of a document stream for the pretrain writer.

Documents (str or anything with a `.text`, e.g. PretrainSample) are grouped into batches of at most
BATCH_DOCS documents / BATCH_CHARS characters and encoded with one `tokenizer.encode_batch(batch,
num_threads=n)` call (sentencepiece's C++ threads, GIL released). A single worker thread encodes
batch k+1 while the caller's thread reads the input and writes batch k, so input is read at most two
batches ahead and memory stays at ~3 batches. Output is identical for any batch size: documents are
encoded independently and yielded in input order.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from niels_gpt.cache.formats import TOKEN_DTYPE

# Measured on 2 cores (benchmarks/bench_pretrain_build.py): 256 docs / 1 MiB per encode_batch call keeps
# both sentencepiece threads busy while bounding memory and read-ahead.
BATCH_DOCS = 256
BATCH_CHARS = 1 << 20


def text_of(item) -> str:
    text = getattr(item, "text", item)  # str or PretrainSample
    if not isinstance(text, str):
        raise TypeError(f"pretrain input must yield str or PretrainSample, got {type(item).__name__}")
    return text


def text_batches(texts: Iterable, wanted_chars: Callable[[], float]) -> Iterator[list[str]]:
    """Lists of texts of at most BATCH_DOCS docs / ~min(BATCH_CHARS, wanted_chars()) chars (>= 1 doc)."""
    it = iter(texts)
    while True:
        cap = min(BATCH_CHARS, wanted_chars())
        batch, chars = [], 0
        for item in it:
            text = text_of(item)
            batch.append(text)
            chars += len(text)
            if len(batch) >= BATCH_DOCS or chars >= cap:
                break
        if not batch:
            return
        yield batch


def encode_docs(tokenizer, batch: list[str], num_threads: int) -> tuple[np.ndarray, list[int]]:
    """(flat uint16 ids with eot after every non-empty doc, per-doc token counts without eot)."""
    ids = tokenizer.encode_batch(batch, num_threads=num_threads)
    lens = [len(d) for d in ids]
    eot = [tokenizer.eot_id]
    parts = itertools.chain.from_iterable((d, eot) for d in ids if d)
    total = sum(lens) + sum(1 for n in lens if n)
    return np.fromiter(itertools.chain.from_iterable(parts), dtype=TOKEN_DTYPE, count=total), lens


def encoded_batches(tokenizer, texts: Iterable, wanted_chars, num_threads: int) -> Iterator[tuple[np.ndarray, list[int]]]:
    """Encoded batches in input order; batch k+1 is read and encoded while the caller writes batch k."""
    batches = text_batches(texts, wanted_chars)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spm-encode") as pool:
        batch = next(batches, None)
        future = pool.submit(encode_docs, tokenizer, batch, num_threads) if batch else None
        while future is not None:
            batch = next(batches, None)  # read ahead while the worker encodes
            result = future.result()
            future = pool.submit(encode_docs, tokenizer, batch, num_threads) if batch else None
            yield result  # the caller writes while the next batch encodes
