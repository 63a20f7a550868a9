"""Random chats for the SFT tests: multi-turn, any role order, empty contents, special-token strings."""

from __future__ import annotations

import random

from niels_gpt.special_tokens import SPECIAL_TOKENS

_WORDS = "the river stone light garden window morning letter engine market winter harbour signal paper".split()
_ODD = ["", "  two  spaces", "tab\there", "line\nbreak", "ünïcødé ✓", *SPECIAL_TOKENS.values()]


def random_content(rng: random.Random, max_words: int = 30) -> str:
    if rng.random() < 0.15:
        return rng.choice(_ODD) + " " + " ".join(rng.choices(_WORDS, k=rng.randint(0, 4)))
    return " ".join(rng.choices(_WORDS, k=rng.randint(0, max_words)))


def random_chat(rng: random.Random, max_messages: int = 7, max_words: int = 30) -> list[dict]:
    """Roles in any order (system in the middle, assistant first, ...), at least one assistant."""
    n = rng.randint(1, max_messages)
    roles = [rng.choice(["system", "user", "assistant", "user", "assistant"]) for _ in range(n)]
    if "assistant" not in roles:
        roles[rng.randrange(n)] = "assistant"
    return [{"role": r, "content": random_content(rng, max_words)} for r in roles]


def random_chats(n: int, seed: int = 0, **kwargs) -> list[list[dict]]:
    rng = random.Random(seed)
    return [random_chat(rng, **kwargs) for _ in range(n)]
