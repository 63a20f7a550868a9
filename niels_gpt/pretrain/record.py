"""What a pretrain meta.json records beyond its shards, and the check that no split is silently empty.

- `shard_format`: how every pretrain meta.json (built or not) says its shards are laid out, beside the
  common header of `niels_gpt.meta.header` (kind, format version, seed, dataset, tokenizer);
- `source_meta`: the dataset read (name, config, the revision actually read, streaming or not, how
  deterministic the bytes are) and the loader's provenance, taken after the input was consumed
  (loaders fill provenance while they are read); `presplit_rule` words the split of a pre-split source;
- `cleaning_record`: meta["cleaning"] = blank documents the writer skipped (`skipped_blank`) plus the
  counts the loaders recorded under `cleaning` in their provenance (`loader_counts`: where they record
  them; `add_counts` sums them, and the parts' counts in a scale-out merge);
- `check_splits_filled`: one `EmptySplitError` for a split that would hold 0 tokens although its budget
  is not 0, naming the source, the split, the documents read, the setting that splits and the fix; a
  budget of 0 is a split left empty on purpose (meta `empty_splits`: {split: ON_PURPOSE}).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

from niels_gpt.data.registry import PRETRAIN_SOURCES
from niels_gpt.layout import SPLITS
from niels_gpt.token_files import TOKEN_DTYPE_NAME

DOCUMENT_SEPARATOR = "eot id after every non-empty document; the document crossing a budget is cut"
ON_PURPOSE = "max_{split}_tokens is 0: built without {split} on purpose"
PRESPLIT_RULE = "pre-split by the source: its train documents -> train, its val documents -> val, in source order"
STREAMING_DETERMINISM = (
    "best effort: the bytes follow the upstream stream's order (datasets shuffle(seed, buffer_size), consumed in order)"
)


class EmptySplitError(ValueError):
    """A split would hold 0 tokens although its budget is not 0 (nothing was published)."""


def check_splits_filled(tokens: dict, budgets: dict, *, source: str, read: dict, blank: dict, split_setting: str):
    """EmptySplitError naming the source, the split, documents read (blank ones), `split_setting` and the
    fix, for the first split with 0 tokens and a budget that is not 0."""
    prefix = f"sources.{source}." if source in PRETRAIN_SOURCES else ""
    for split in SPLITS:
        if tokens[split] or budgets[split] == 0:
            continue
        key = split_setting.split("=")[0]
        fix = (
            ("raise " if key.endswith(("val_doc_prob", "val_frac")) else "change ") + f"{key} so val gets documents"
            if split == "val"
            else "give the source text for train (check its dataset, data files or notes folder)"
        )
        raise EmptySplitError(
            f"{source}: the {split} split would hold 0 tokens (documents read: {read[split]:,}, "
            f"blank: {blank[split]:,}; split by {split_setting}). To fix: {fix}, or set "
            f"{prefix}max_{split}_tokens: 0 to build without {split} on purpose"
        )


def add_counts(counts) -> dict:
    """The dicts of counts in `counts` (None skipped) added up key by key, keys in first-seen order."""
    out: dict = {}
    for c in counts:
        for key, n in (c or {}).items():
            out[key] = out.get(key, 0) + n
    return out


CLEANING_ENTRIES = ("", "stream", "train", "val")  # where loaders record `cleaning` in provenance ("": at its top)


def loader_counts(provenance: dict | None) -> Iterator[tuple[str, dict | None]]:
    """(entry, the cleaning counts a loader keeps there, or None) for every entry of CLEANING_ENTRIES."""
    prov = provenance or {}
    for key in CLEANING_ENTRIES:
        entry = prov if key == "" else prov.get(key)
        yield key, entry.get("cleaning") if isinstance(entry, dict) else None


def cleaning_record(provenance: dict, skipped_blank: int) -> dict:
    """meta["cleaning"]: skipped_blank plus the counts the loaders recorded in provenance (summed)."""
    return add_counts([{"skipped_blank": skipped_blank}, *(counts for _, counts in loader_counts(provenance))])


def _hub_record(provenance: dict) -> dict:
    """The loader's record of what it opened (its "stream" or "train" entry, else the provenance itself)."""
    for rec in (provenance.get("stream"), provenance.get("train"), provenance):
        if isinstance(rec, dict) and "dataset_id" in rec:
            return rec
    return {}


def source_meta(*, dataset_name, dataset_config, provenance) -> dict:
    """Provenance fields; read only after the input was consumed (loaders fill provenance while read)."""
    provenance = copy.deepcopy(dict(provenance or {}))
    hub = _hub_record(provenance)
    streaming = bool(hub.get("streaming", provenance.get("streaming", False)))
    return {
        "dataset_name": dataset_name if dataset_name is not None else hub.get("dataset_id"),
        "dataset_config": dataset_config if dataset_config is not None else hub.get("config"),
        "dataset_revision": hub.get("revision"),  # what the loader read (None: local files, or nothing opened)
        "streaming": streaming,
        "determinism": STREAMING_DETERMINISM if streaming else "exact: same input order + seed => same bytes",
        "provenance": provenance,
    }


def presplit_rule(provenance: dict) -> str:
    """PRESPLIT_RULE plus the source's own split names / rule when the loader recorded them."""
    names = [
        f"{split} = source split {provenance[split]['split']!r}"
        for split in ("train", "val")
        if isinstance(provenance.get(split), dict) and "split" in provenance[split]
    ]
    details = names + ([provenance["split_rule"]] if provenance.get("split_rule") else [])
    return PRESPLIT_RULE + (f" ({'; '.join(details)})" if details else "")


def shard_format(shard_bytes: int) -> dict:
    """The token dtype, the document separator and the shard size of a pretrain cache."""
    return {"token_dtype": TOKEN_DTYPE_NAME, "document_separator": DOCUMENT_SEPARATOR, "shard_bytes": shard_bytes}
