"""Batched tokenization of a document stream for the pretrain writer, in worker processes.

Documents (str or anything with a `.text`, e.g. PretrainSample) are grouped into batches of at most
BATCH_DOCS documents / BATCH_CHARS characters. Each batch is encoded by `encode_documents` in a worker
process (tokenizer/workers.py): the worker encodes the texts to int32 arrays, joins them into one
uint16 array with the eot id after every non-empty document, and returns it with the documents' token
counts (eot not counted); the caller receives `(flat, lens)` per batch, in input order, and only
writes. Output is identical for any batch size or worker count: documents are encoded independently
and come back in input order. A blank document (empty or whitespace-only, `data.normalize.is_blank`)
is encoded as no tokens and gets no eot: the writers see its length 0, skip it and count it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from niels_gpt.data.normalize import is_blank
from niels_gpt.token_files import TOKEN_DTYPE
from niels_gpt.tokenizer.workers import EncodeWorkers

# Measured on 2 cores (benchmarks/bench_pretrain_build.py): 256 docs / 1 MiB per batch (~0.1 s of one
# worker's time); larger batches were no faster and hold more text and ids in memory.
BATCH_DOCS = 256
BATCH_CHARS = 1 << 20


def text_of(item) -> str:
    if type(item) is str:
        return item
    text = getattr(item, "text", item)  # PretrainSample (or a str subclass)
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


def join_documents(arrays: list[np.ndarray], end: int) -> np.ndarray:
    """The documents' ids as one TOKEN_DTYPE array, `end` after every non-empty one (every id fits:
    the tokenizer's vocabulary was checked against uint16 when it was loaded)."""
    end_array = np.array([end], dtype=arrays[0].dtype if arrays else np.int32)
    parts = [part for ids in arrays if len(ids) for part in (ids, end_array)]
    return np.concatenate(parts).astype(TOKEN_DTYPE) if parts else np.zeros(0, dtype=TOKEN_DTYPE)


def encode_documents(tokenizer, texts: list[str]) -> tuple[np.ndarray, list[int]]:
    """(flat uint16 ids with eot after every non-empty doc, per-doc token counts without eot); runs in
    a worker. The ids come from sentencepiece as int32 arrays (`encode_batch_arrays`), so they never
    exist as Python ints, here or in the writing process."""
    arrays = tokenizer.encode_batch_arrays(texts, num_threads=1)
    return join_documents(arrays, tokenizer.eot_id), [len(ids) for ids in arrays]


def encoded_batches(workers: EncodeWorkers, texts: Iterable, wanted_chars) -> Iterator[tuple[np.ndarray, list[int]]]:
    """`encode_documents` of every batch of `texts`, in input order, encoded by `workers`."""
    return workers.map(encode_documents, text_batches(texts, wanted_chars))
