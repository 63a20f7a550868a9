"""Deterministic English-like text for tests: the tiny tokenizer's training corpus and small documents."""

from __future__ import annotations

import random

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
