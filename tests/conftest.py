"""Shared fixtures: a throwaway tiny SentencePiece model trained once per session, and an isolated
`datasets` cache for tests that read local files through `datasets.load_dataset`."""

from __future__ import annotations

import pytest

from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece
from tests.support.corpus import tiny_corpus


@pytest.fixture(scope="session")
def tiny_tokenizer_path(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tok") / "spm.model"
    train_sentencepiece(tiny_corpus(), path, vocab_size=400, num_threads=1)
    return str(path)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_path) -> SentencePieceTokenizer:
    return SentencePieceTokenizer(tiny_tokenizer_path)


@pytest.fixture(scope="session")
def isolated_hf_cache(tmp_path_factory):
    """Prepared (non-streaming) datasets write Arrow caches: keep them out of ~/.cache.

    Also drops datasets' 5 s sleep after every buffer-shuffled stream (a guard against an Arrow
    crash at interpreter exit, apache/arrow#45214): it would make each shuffled test take 5 s.
    """
    import datasets

    old = datasets.config.HF_DATASETS_CACHE, datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN
    datasets.config.HF_DATASETS_CACHE = tmp_path_factory.mktemp("hf_datasets_cache")
    datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0
    yield datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE, datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = old
