"""The chat template: the only place a chat becomes token ids.

Template, one block per message, in the order given (no reordering, no alternation check):

    <sys>  {content ids} <eot>      system
    <usr>  {content ids} <eot>      user
    <asst> {content ids} <eot>      assistant

Role and eot ids are inserted explicitly from `tokenizer.special_ids`; each content is encoded on
its own (`tokenizer.encode_batch`), which never yields a special id (they are control symbols), so a
message quoting `<|ngpt_eot_...|>` is ordinary text. The eot after the last message is optional
(`add_final_eot=False`, for prompting a model).

`render_chats` renders many examples at once into `RenderedChats` (uint16 tokens, bool loss mask,
per-example lengths: compact arrays a worker process can hand back cheaply); `render_chat_sft` is the
same for one chat, as Python lists.

Labels: the token id on assistant content and on the assistant's eot (so the model learns to
stop), -100 (ignore_index) everywhere else, role tokens included. An example without an
assistant message has nothing to learn and is refused with ValueError.

`loss_mask_from_tokens` recomputes the same mask from token ids alone, which is how the SFT
dataset masks cached examples: position p is loss-active iff the most recent role token at or
before p is asst and token p is not itself a role token.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from niels_gpt.special_tokens import ROLE_TO_SPECIAL
from niels_gpt.token_files import pack_tokens

IGNORE_INDEX = -100  # torch.nn.functional.cross_entropy's default ignore_index
ROLE_NAMES = tuple(ROLE_TO_SPECIAL.values())  # ("sys", "usr", "asst"): the role tokens
_MASK_CHUNK = 1 << 22  # tokens per chunk in loss_mask_from_tokens: bounds temporaries to ~100 MB


def normalize_messages(messages: Any, *, where: str = "example") -> list[tuple[str, str]]:
    """(role, content) pairs from dicts {"role","content"} or ChatMessage objects, validated.

    `where` names the example in error messages (e.g. "primer example 12").
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise ValueError(f"{where}: messages must be a list of {{role, content}}, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, (dict, Mapping)):  # dict first: the common case, without the ABC check
            role, content = m.get("role"), m.get("content")
        else:
            role, content = getattr(m, "role", None), getattr(m, "content", None)
        if role not in ROLE_TO_SPECIAL:
            raise ValueError(f"{where}, message {i}: role must be one of {sorted(ROLE_TO_SPECIAL)}, got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"{where}, message {i}: content must be a string, got {type(content).__name__}")
        out.append((role, content))
    if not out:
        raise ValueError(f"{where}: messages is empty; an SFT example needs at least one assistant message")
    if not any(role == "assistant" for role, _ in out):
        raise ValueError(
            f"{where}: no assistant message (roles: {[r for r, _ in out]}); "
            "an SFT example needs at least one assistant message to learn from"
        )
    return out


@dataclass(frozen=True)
class RenderedChats:
    """Examples rendered back to back, as compact arrays.

    tokens   uint16 input_ids of every example, concatenated in input order
    mask     bool, one per token: True where the token is a loss-active target (its label is its id),
             i.e. assistant content and the assistant's eot; False where the label is IGNORE_INDEX
    lengths  int64 token count of each example (example i is tokens[sum(lengths[:i]):][:lengths[i]])
    """

    tokens: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray


def render_chats(
    tokenizer, examples: Sequence[Sequence[tuple[str, str]]], *, add_final_eot: bool = True
) -> RenderedChats:
    """Render validated examples ((role, content) pairs, see normalize_messages) with the template.

    Every content is encoded independently in one `encode_batch` call; each message becomes one block
    [role id, content ids..., eot] (no eot after an example's last message when `add_final_eot` is
    False), packed straight to uint16; the mask follows from the block lengths. The SFT writer runs
    this in worker processes.
    """
    roles = [role for pairs in examples for role, _ in pairs]
    ids = tokenizer.encode_batch([content for pairs in examples for _, content in pairs], num_threads=1)
    per_example = np.fromiter(map(len, examples), dtype=np.int64, count=len(examples))
    has_eot = np.ones(len(ids), dtype=bool)
    if not add_final_eot:
        has_eot[np.cumsum(per_example) - 1] = False
    special = tokenizer.special_ids
    eot = special["eot"]
    role_ids = [special[ROLE_TO_SPECIAL[r]] for r in roles]
    tokens = pack_tokens(
        [role, *content, eot] if with_eot else [role, *content]
        for role, content, with_eot in zip(role_ids, ids, has_eot.tolist())
    )
    block = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)) + 1 + has_eot  # role + content + eot
    mask = np.repeat(np.array([r == "assistant" for r in roles], dtype=bool), block)
    mask[np.cumsum(block) - block] = False  # the role token itself is never a target
    first_message = np.cumsum(per_example) - per_example
    lengths = np.add.reduceat(block, first_message) if len(block) else np.zeros(0, dtype=np.int64)
    return RenderedChats(tokens, mask, lengths.astype(np.int64))


def render_chat_sft(tokenizer, messages, *, add_final_eot: bool = True) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one chat; see the module docstring for the template and labels."""
    r = render_chats(tokenizer, [normalize_messages(messages)], add_final_eot=add_final_eot)
    return r.tokens.tolist(), np.where(r.mask, r.tokens.astype(np.int64), IGNORE_INDEX).tolist()


def loss_mask_from_tokens(tokens, special_ids: Mapping[str, int], *, example_starts=None):
    """Bool numpy array: True where a token is a loss-active target (assistant content or its eot).

    Position p is active iff the most recent role token at or before p is asst and token p is not
    itself a role token. `example_starts` (offsets of concatenated examples) resets that state at
    each example start, so an example never inherits its predecessor's role. Vectorized; runs in
    chunks so temporaries stay bounded on multi-GB inputs.
    """
    tokens = np.asarray(tokens)
    n = tokens.shape[0]
    role_ids = np.array([special_ids[name] for name in ROLE_NAMES], dtype=np.int64)
    asst = special_ids["asst"]
    starts = np.sort(np.asarray([] if example_starts is None else example_starts, dtype=np.int64))
    mask = np.zeros(n, dtype=bool)
    carry_asst = False  # was the last role token before this chunk asst (and no reset since)?
    for lo in range(0, n, _MASK_CHUNK):
        hi = min(lo + _MASK_CHUNK, n)
        chunk = tokens[lo:hi]
        is_role = np.isin(chunk, role_ids)
        marker = is_role.copy()
        marker[starts[np.searchsorted(starts, lo) : np.searchsorted(starts, hi)] - lo] = True
        pos = np.where(marker, np.arange(hi - lo, dtype=np.int64), -1)
        last = np.maximum.accumulate(pos)
        seen = last >= 0
        last_is_asst = np.where(seen, chunk[np.maximum(last, 0)] == asst, carry_asst)
        mask[lo:hi] = last_is_asst & ~is_role
        if hi > lo:
            carry_asst = bool(last_is_asst[-1])
    return mask
