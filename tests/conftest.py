"""Shared fixtures: a throwaway tiny SentencePiece model trained once per session, and an isolated
`datasets` cache for tests that read local files through `datasets.load_dataset`."""

from __future__ import annotations

import random

import pytest

from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece

_WORDS = (
    "the of and to in is was for on that with as by at from his her an which it be this are "
    "river stone light garden window morning letter engine market winter harbour signal paper "
    "quiet bright narrow careful sudden gentle ancient hollow copper silver north south "
    "walks builds reads carries opens writes measures follows returns remembers "
    "def return class import for while if else print value index list dict"
).split()


def tiny_corpus(n_docs: int = 400, seed: int = 0) -> list[str]:
    """Deterministic multi-line English-like documents (a few hundred KB)."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        lines = []
        for _ in range(rng.randint(1, 6)):
            words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 24))]
            words[0] = words[0].capitalize()
            lines.append(" ".join(words) + rng.choice([".", ".", "?", "!", ":"]))
        if rng.random() < 0.2:
            lines.append("    " + " ".join(rng.choice(_WORDS) for _ in range(5)))
        docs.append("\n".join(lines))
    return docs


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
