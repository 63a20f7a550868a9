"""The chat template: the only place a chat becomes token ids.

Template, one block per message, in the order given (no reordering, no alternation check):

    <sys>  {content ids} <eot>      system
    <usr>  {content ids} <eot>      user
    <asst> {content ids} <eot>      assistant

Role and eot ids are inserted explicitly from `tokenizer.special_ids`; content goes through
`tokenizer.encode(content)`, which never yields a special id (they are control symbols), so a
message quoting `<|ngpt_eot_...|>` is ordinary text. The eot after the last message is optional
(`add_final_eot=False`, for prompting a model).

Labels: the token id on assistant content and on the assistant's eot (so the model learns to
stop), -100 (ignore_index) everywhere else, role tokens included. An example without an
assistant message has nothing to learn and is refused with ValueError.

`loss_mask_from_tokens` recomputes the same mask from token ids alone, which is how the SFT
dataset masks cached examples: position p is loss-active iff the most recent role token at or
before p is asst and token p is not itself a role token.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from niels_gpt.special_tokens import ROLE_TO_SPECIAL

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
        if isinstance(m, Mapping):
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


def assemble(
    pairs: Sequence[tuple[str, str]],
    content_ids: Sequence[Sequence[int]],
    special_ids: Mapping[str, int],
    *,
    add_final_eot: bool = True,
) -> tuple[list[int], list[int]]:
    """input_ids and labels from validated (role, content) pairs and their encoded contents."""
    eot = special_ids["eot"]
    input_ids: list[int] = []
    labels: list[int] = []
    last = len(pairs) - 1
    for i, ((role, _), ids) in enumerate(zip(pairs, content_ids, strict=True)):
        is_asst = role == "assistant"
        block = [special_ids[ROLE_TO_SPECIAL[role]], *ids]
        if add_final_eot or i < last:
            block.append(eot)
        input_ids.extend(block)
        if is_asst:
            labels.append(IGNORE_INDEX)
            labels.extend(block[1:])
        else:
            labels.extend([IGNORE_INDEX] * len(block))
    return input_ids, labels


def render_chat_sft(tokenizer, messages, *, add_final_eot: bool = True) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one chat; see the module docstring for the template and labels."""
    pairs = normalize_messages(messages)
    content_ids = [tokenizer.encode(content) for _, content in pairs]
    return assemble(pairs, content_ids, tokenizer.special_ids, add_final_eot=add_final_eot)


def render_chat_sft_batch(
    tokenizer, examples: Sequence[Sequence[tuple[str, str]]], *, add_final_eot: bool = True
) -> list[tuple[list[int], list[int]]]:
    """render_chat_sft over validated examples, encoding every content in one batched call.

    Same output as render_chat_sft per example (the cache roundtrip test checks it); used by the
    SFT writer, where one `encode_batch` per few hundred examples is several times faster.
    """
    contents = [content for pairs in examples for _, content in pairs]
    encode_batch = getattr(tokenizer, "encode_batch", None)
    encoded = encode_batch(contents) if encode_batch else [tokenizer.encode(c) for c in contents]
    out, k = [], 0
    for pairs in examples:
        out.append(assemble(pairs, encoded[k : k + len(pairs)], tokenizer.special_ids, add_final_eot=add_final_eot))
        k += len(pairs)
    return out


def loss_mask_from_tokens(tokens, special_ids: Mapping[str, int], *, example_starts=None):
    """Bool numpy array: True where a token is a loss-active target (assistant content or its eot).

    Position p is active iff the most recent role token at or before p is asst and token p is not
    itself a role token. `example_starts` (offsets of concatenated examples) resets that state at
    each example start, so an example never inherits its predecessor's role. Vectorized; runs in
    chunks so temporaries stay bounded on multi-GB inputs.
    """
    import numpy as np

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
