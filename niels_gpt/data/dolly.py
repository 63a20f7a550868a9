"""databricks-dolly-15k as SFT chat samples .

    [system "you are a helpful assistant."]      only with include_system=True
    user       instruction + ("\n\ncontext:\n" + context  if context.strip() else "")
    assistant  response

meta: `index` (the row's index in the split) and `category`. The split is small (15k rows), so it is
read prepared (not streamed); `shuffle=True` orders rows by `torch.randperm` under a Generator
seeded with `seed`, so the order is a function of the seed alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from niels_gpt.data.hub import iter_rows, open_dataset
from niels_gpt.data.normalize import normalize_text
from niels_gpt.data.source import HubRead
from niels_gpt.data.types import ChatMessage, ChatSample

DATASET_ID = "databricks/databricks-dolly-15k"
SOURCE = "dolly15k"
SYSTEM_PROMPT = "you are a helpful assistant."
CONTEXT_TEMPLATE = "\n\ncontext:\n{context}"
REQUIRED_FIELDS = ("instruction", "context", "response")


def dolly_row_to_chat(row: Mapping, index: int | None = None, *, include_system: bool = False) -> ChatSample:
    """One dolly row -> ChatSample (2 messages, or 3 with the system message)."""
    missing = [k for k in REQUIRED_FIELDS if k not in row]
    if missing:
        raise ValueError(f"dolly row {index}: missing field(s) {missing}; keys: {list(row)}")
    instruction = normalize_text(row["instruction"] or "")
    context = normalize_text(row["context"] or "")
    user = instruction + (CONTEXT_TEMPLATE.format(context=context) if context.strip() else "")
    messages = [ChatMessage("user", user), ChatMessage("assistant", normalize_text(row["response"] or ""))]
    if include_system:
        messages.insert(0, ChatMessage("system", SYSTEM_PROMPT))
    meta: dict = {"index": index}
    if row.get("category") is not None:
        meta["category"] = row["category"]
    return ChatSample(messages=messages, source=SOURCE, meta=meta)


def iter_dolly_sft(
    *,
    split: str = "train",
    seed: int = 42,
    shuffle: bool = True,
    take: int | None = None,
    include_system: bool = False,
    read: HubRead | None = None,
    provenance: dict | None = None,
) -> Iterator[ChatSample]:
    """ChatSamples in row order, or in seeded torch.randperm order with shuffle=True; at most `take`.

    `split`, `seed`, `shuffle` and `take` describe a read of the hub dataset; `read` (a HubRead: what the
    registry passes, or a test's local `data_files`) replaces them all.
    """
    read = read or HubRead(DATASET_ID, split=split, seed=seed, shuffle=shuffle, take=take)
    ds = open_dataset(read, provenance)
    if provenance is not None:
        provenance.update({"shuffle": read.shuffle, "seed": read.seed, "num_rows": len(ds)})
    for index, row in iter_rows(ds, read, provenance):
        yield dolly_row_to_chat(row, index, include_system=include_system)
