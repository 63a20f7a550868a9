"""Message trees in the flat row format of OpenAssistant/oasst1, for the offline sample.

A tree starts with a prompter message (the root, `parent_id` null, `message_tree_id` = its own id),
gets 1-3 ranked assistant replies, prompter follow-ups under some of them, and so on. Some trees
are long single threads (10+ messages), some are in German, Spanish or French, a few messages are
`deleted` (their subtrees stay, as in the real dump). Rows of a tree are contiguous but shuffled,
so a child can come before its parent, as in the real export.
"""

from __future__ import annotations

import datetime as dt
import uuid

from scripts.sample_data import chat_turns
from scripts.sample_data.sentences import Writer

OTHER_LANGS = ["de", "es", "fr"]  # every 7th tree (~14%) is in one of these, in turn
EMOJI_NAMES = ["+1", "-1", "_skip_reply", "_skip_ranking", "red_heart", "laugh", "hundred_points", "thinking"]
LABEL_NAMES = [
    "spam",
    "fails_task",
    "lang_mismatch",
    "pii",
    "not_appropriate",
    "hate_speech",
    "sexual_content",
    "quality",
    "toxicity",
    "humor",
    "helpfulness",
    "creativity",
    "violence",
]
DETOXIFY_KEYS = ["toxicity", "severe_toxicity", "obscene", "identity_attack", "insult", "threat", "sexual_explicit"]
EPOCH = dt.datetime(2023, 2, 1, tzinfo=dt.timezone.utc)


def new_id(w: Writer) -> str:
    return str(uuid.UUID(int=w.rng.getrandbits(128), version=4))


class TreeBuilder:
    """Grows one tree; `rows` collects its messages in creation order."""

    def __init__(self, w: Writer, users: list[str], lang: str, deep: bool):
        self.w, self.users, self.lang, self.deep = w, users, lang, deep
        self.topic = w.topic()
        self.rows: list[dict] = []
        self.clock = EPOCH + dt.timedelta(seconds=w.rng.randint(0, 60 * 86400))
        self.tree_id = ""

    def text(self, role: str, depth: int, reply_to: str) -> tuple[str, str]:
        w = self.w
        if self.lang != "en":
            return chat_turns.foreign_turn(w, self.lang, role == "prompter", depth == 0), ""
        if depth == 0:
            return chat_turns.qa(w, self.topic)
        if role == "prompter":
            return chat_turns.followup(w, self.topic)
        return reply_to, ""

    def message(self, role: str, parent: str | None, text: str, rank: int | None) -> dict:
        w = self.w
        self.clock += dt.timedelta(seconds=w.rng.randint(30, 3 * 86400))
        mid = new_id(w)
        if parent is None:
            self.tree_id = mid
        deleted = parent is not None and w.rng.random() < 0.04
        review_count = w.rng.randint(0, 5) if not deleted else w.rng.randint(1, 3)
        row = {
            "message_id": mid,
            "parent_id": parent,
            "user_id": w.pick(self.users),
            "created_date": self.clock.isoformat(timespec="microseconds"),
            "text": text,
            "role": role,
            "lang": self.lang,
            "review_count": review_count,
            "review_result": None if review_count == 0 else (not deleted or w.rng.random() < 0.3),
            "deleted": deleted,
            "rank": rank,
            "synthetic": False,
            "model_name": None,
            "detoxify": None
            if w.rng.random() < 0.1
            else {k: round(w.rng.random() ** 6 * 0.05, 6) for k in DETOXIFY_KEYS},
            "message_tree_id": self.tree_id,
            "tree_state": "ready_for_export",
            "emojis": self._emojis(),
            "labels": self._labels(role),
        }
        self.rows.append(row)
        return row

    def _emojis(self) -> dict | None:
        w = self.w
        if w.rng.random() < 0.35:
            return None
        names = w.rng.sample(EMOJI_NAMES, w.rng.randint(1, 3))
        return {"name": names, "count": [w.rng.randint(1, 9) for _ in names]}

    def _labels(self, role: str) -> dict | None:
        w = self.w
        if w.rng.random() < 0.2:
            return None
        names = (
            LABEL_NAMES[:4]
            if role == "prompter" and w.rng.random() < 0.5
            else w.rng.sample(LABEL_NAMES, w.rng.randint(3, 9))
        )
        return {
            "name": names,
            "value": [round(w.rng.random(), 4) for _ in names],
            "count": [w.rng.randint(1, 5) for _ in names],
        }

    def grow(self, parent: str | None, role: str, depth: int, pending_answer: str, n_siblings: int) -> None:
        """Add `n_siblings` children of `parent` with `role`, then recurse below each of them."""
        w = self.w
        ranks = list(range(n_siblings)) if n_siblings > 1 else [None if w.rng.random() < 0.3 else 0]
        w.rng.shuffle(ranks)
        for k in range(n_siblings):
            if role == "assistant" and k > 0:  # sibling replies: same question, different answer
                pending_answer = self._alt_answer(pending_answer)
            text, answer = self.text(role, depth, pending_answer)
            row = self.message(role, parent, text, None if parent is None else ranks[k])
            max_depth = 14 if self.deep else 7
            stop = depth + 1 >= max_depth or (not self.deep and w.rng.random() < 0.25 + 0.1 * depth)
            if stop and depth > 0:
                continue
            if role == "prompter":
                self.grow(
                    row["message_id"], "assistant", depth + 1, answer, 1 if self.deep else w.rng.choice([1, 1, 2, 3])
                )
            else:
                self.grow(row["message_id"], "prompter", depth + 1, "", 1 if self.deep else w.rng.choice([1, 1, 2]))

    def _alt_answer(self, answer: str) -> str:
        w = self.w
        if self.lang != "en" or not answer:
            return answer
        return w.pick(["Short answer: ", "Good question! ", "", "Sure. "]) + w.paragraph(
            self.topic, w.rng.randint(3, 8)
        )


def build_trees(w: Writer, n_trees: int) -> list[dict]:
    """Flat rows of `n_trees` trees; every tree's rows contiguous, shuffled inside the tree."""
    users = [new_id(w) for _ in range(max(10, n_trees // 2))]
    rows: list[dict] = []
    for i in range(n_trees):
        lang = OTHER_LANGS[(i // 7) % len(OTHER_LANGS)] if i % 7 == 3 else "en"
        tb = TreeBuilder(w, users, lang, deep=(i % 12 == 5))
        tb.grow(None, "prompter", 0, "", 1)
        tree_rows = tb.rows
        w.rng.shuffle(tree_rows)
        rows.extend(tree_rows)
    return rows
