"""The source registry: the one list of sources, and config-driven access to each of them.

Every other part of the pipeline (the rules, the jobs, the CLIs, the config checks) takes its source
names from the tuples below. `cfg` is the validated dict of `niels_gpt.config.prepare_config`
(`sources.*` keys of config_schema.yaml). Demo routing lives here and only here: with `cfg["demo"]`,
a hub source's read names its `sources.<name>.demo_data_files`, read through the same
`hub.open_dataset` path, and roam reads `demo_root`.

- `hub_read(cfg, source)`: the `HubRead` of a hub source, built once and passed to its loader.
- `pretrain_input(cfg, source)`: a `PretrainInput`; fineweb_edu / gutenberg are one seeded,
  buffer-shuffled "stream" (the writer assigns val by its seeded rule); wikitext (one sample per
  article) and roam (one per file) are "presplit". Iterables are lazy and re-iterable.
  `pretrain_input(cfg, source, num_parts=N, part=k)` (STREAMED_SOURCES only) reads part k of N
  disjoint parts of the stream: `hub.shard_parts` before the buffer shuffle.
- `tokenizer_texts(cfg, source, provenance)`: the train side of a pretrain source, lazily, in a fixed
  order; a hub source's record of what it read (dataset, split, the commit) goes in provenance["read"].
- `sft_input(cfg, source)`: (ChatSample iterator, provenance); every meta has "group", the split
  key (message_tree_id for oasst1, the row / example index for dolly15k and primer).
- `source_input_files(cfg, source)` / `stream_input_files(cfg, stream)`: the local files a source or a
  byte stream reads (glob only: the Snakefile calls them at parse time).

Provenance dicts are JSON-able and filled while the iterables are consumed (the hub revision is
only known once the dataset is opened): read them after iterating.
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from niels_gpt.data.retry import RetryPolicy
from niels_gpt.data.source import HubRead, data_files_by_split
from niels_gpt.data.types import ChatSample, PretrainSample

PRETRAIN_SOURCES = ("fineweb_edu", "wikitext", "gutenberg", "roam")
SFT_SOURCES = ("dolly15k", "oasst1", "primer")
STREAM_SOURCES = ("wiki", "roam", "primer")  # byte streams
HUB_SOURCES = ("fineweb_edu", "wikitext", "gutenberg", "dolly15k", "oasst1")
# Pretrain sources read as one shuffled stream, split train/val per document by a seeded rule. Being
# big, they are the ones whose tokenization can run as parts (pretrain.num_parts); wikitext (two
# source splits) and roam (a notes folder) always build as one job.
STREAMED_SOURCES = ("fineweb_edu", "gutenberg")
# The config section (sources.<name>) each byte stream reads its settings and text from.
STREAM_CONFIG = {"wiki": "wikitext", "roam": "roam", "primer": "primer"}


@dataclass
class PretrainInput:
    kind: Literal["stream", "presplit"]
    stream: Iterable[PretrainSample] | None
    train: Iterable[PretrainSample] | None
    val: Iterable[PretrainSample] | None
    provenance: dict


class _Lazy:
    """An iterable that calls `make()` afresh for every iteration (nothing is read until then)."""

    def __init__(self, make: Callable[[], Iterator]):
        self._make = make

    def __iter__(self) -> Iterator:
        return iter(self._make())


def _check(source: str, allowed: tuple[str, ...], what: str) -> None:
    if source not in allowed:
        raise ValueError(f"unknown {what}source {source!r}; expected one of {', '.join(allowed)}")


def hub_read(cfg: dict, source: str) -> HubRead:
    """How a hub source is read, from its config section: dataset, config, split (wikitext: its train
    split), revision and seed; STREAMED_SOURCES stream with their buffer shuffle (none for a buffer of 0).
    With cfg["demo"], the source's demo_data_files replace the hub and its revision."""
    _check(source, HUB_SOURCES, "hub ")
    s = cfg["sources"][source]
    where = {"data_files": s["demo_data_files"]} if cfg["demo"] else {"revision": s["revision"]}
    split = s["train_split"] if source == "wikitext" else s["split"]
    read = HubRead(s["dataset_id"], s.get("config"), split=split, seed=cfg["seed"], retry=retry_policy(cfg), **where)
    if source not in STREAMED_SOURCES:
        return read
    buffer = s["shuffle_buffer"]
    return replace(read, streaming=True, shuffle=buffer > 0, shuffle_buffer_size=max(buffer, 1))


def retry_policy(cfg: dict) -> RetryPolicy:
    """How hub calls and stream reads are retried: the config section `hub` (retry.py)."""
    return RetryPolicy.from_config(cfg.get("hub"))


def roam_root(cfg: dict) -> str:
    s = cfg["sources"]["roam"]
    return s["demo_root"] if cfg["demo"] else s["root"]


def _stream(cfg: dict, source: str, read: HubRead, prov: dict) -> Iterator:
    if source == "fineweb_edu":
        from niels_gpt.data.fineweb_edu import iter_fineweb_edu

        return iter_fineweb_edu(read=read, provenance=prov)
    from niels_gpt.data.gutenberg import iter_gutenberg

    strip = cfg["sources"]["gutenberg"]["strip_boilerplate"]
    return iter_gutenberg(read=read, strip_boilerplate=strip, provenance=prov)


def _wikitext_articles(read: HubRead, split: str, prov: dict) -> Iterator:
    from niels_gpt.data.wikitext import iter_wikitext, wikitext_articles

    return wikitext_articles(iter_wikitext(read=replace(read, split=split), provenance=prov))


def _roam_split(cfg: dict) -> tuple[list[str], list[str]]:
    from niels_gpt.data.roam import list_roam_paths, split_roam_paths

    return split_roam_paths(list_roam_paths(roam_root(cfg)), cfg["sources"]["roam"]["val_frac"], cfg["seed"])


def _static_provenance(cfg: dict, source: str, read: HubRead) -> dict:
    """What is known before reading: the dataset asked for (the resolved revision comes later)."""
    prov = {"source": source, "demo": bool(cfg["demo"]), "dataset_id": read.dataset_id, "config": read.config}
    prov["revision_requested"] = read.revision
    if read.local:
        prov["data_files_globs"] = read.data_files
    return prov


def pretrain_input(
    cfg: dict, source: str, *, num_parts: int = 1, part: int = 0, position: object = None
) -> PretrainInput:
    """The lazy input of a pretrain source. Resolved details (revision actually read, local files and
    their sha256) land in provenance["stream"] or provenance["train"] / ["val"] while iterating.
    `num_parts` > 1 (STREAMED_SOURCES only): part `part` of the stream, disjoint from the other parts.
    `position` (a resumable.StreamPosition, STREAMED_SOURCES): where a resumed build's stream starts."""
    _check(source, PRETRAIN_SOURCES, "pretrain ")
    if num_parts != 1 and source not in STREAMED_SOURCES:
        raise ValueError(
            f"pretrain source {source!r} is built as one job; only {', '.join(STREAMED_SOURCES)} split into parts "
            f"(got num_parts={num_parts})"
        )
    if source in STREAMED_SOURCES:
        s = cfg["sources"][source]
        read = replace(hub_read(cfg, source), num_parts=num_parts, part=part, position=position)
        prov = _static_provenance(cfg, source, read)
        prov.update(
            {"split": s["split"], "streaming": True, "shuffle_buffer": s["shuffle_buffer"], "seed": cfg["seed"]}
        )
        prov["stream"] = {}
        stream = _Lazy(lambda: _stream(cfg, source, read, prov["stream"]))
        return PretrainInput("stream", stream, None, None, prov)
    if source == "wikitext":
        s = cfg["sources"]["wikitext"]
        read = hub_read(cfg, source)
        prov = _static_provenance(cfg, source, read)
        prov.update({"splits": {"train": s["train_split"], "val": s["val_split"]}, "streaming": False})
        prov["train"], prov["val"] = {}, {}
        train = _Lazy(lambda: _wikitext_articles(read, s["train_split"], prov["train"]))
        val = _Lazy(lambda: _wikitext_articles(read, s["val_split"], prov["val"]))
        prov["document"] = "article: lines from a ' = Title = ' heading to the next, joined with '\\n'"
        return PretrainInput("presplit", None, train, val, prov)
    from niels_gpt.data.roam import iter_roam
    from niels_gpt.splits import SPLIT_RULE

    root = roam_root(cfg)
    train_paths, val_paths = _roam_split(cfg)
    prov = {
        "source": source,
        "demo": bool(cfg["demo"]),
        "dataset_id": "roam",
        "root": root,
        "val_frac": cfg["sources"]["roam"]["val_frac"],
        "seed": cfg["seed"],
        "split_rule": SPLIT_RULE,
        "files": {"train": [_rel(p, root) for p in train_paths], "val": [_rel(p, root) for p in val_paths]},
    }
    train = _Lazy(lambda: iter_roam(train_paths, root=root))
    val = _Lazy(lambda: iter_roam(val_paths, root=root))
    return PretrainInput("presplit", None, train, val, prov)


def _rel(path: str, root: str) -> str:
    return Path(path).relative_to(root).as_posix()


def tokenizer_texts(cfg: dict, source: str, provenance: dict | None = None) -> Iterator[str]:
    """Train-side texts of a pretrain source, lazily, deterministic for a config (the caller caps them).
    For a hub source, `provenance` (if given) gets "read": the loader's record of what it opened, the
    commit included, filled once the first text is read."""
    inp = pretrain_input(cfg, source)
    if provenance is not None and source in HUB_SOURCES:
        provenance["read"] = inp.provenance["stream" if inp.kind == "stream" else "train"]
    for sample in inp.stream if inp.kind == "stream" else inp.train:
        yield sample.text


def sft_input(cfg: dict, source: str) -> tuple[Iterator[ChatSample], dict]:
    """(ChatSample iterator, provenance); each sample's meta["group"] is its split group key."""
    _check(source, SFT_SOURCES, "SFT ")
    s = cfg["sources"][source]
    prov: dict = {"source": source, "demo": bool(cfg["demo"])}
    if source == "dolly15k":
        from niels_gpt.data.dolly import iter_dolly_sft

        samples = iter_dolly_sft(read=hub_read(cfg, source), include_system=s["include_system"], provenance=prov)
        return _grouped(samples, "index"), prov
    if source == "oasst1":
        from niels_gpt.data.oasst1 import iter_oasst1_sft

        options = {"english_only": s["english_only"], "max_messages": s["max_messages"]}
        samples = iter_oasst1_sft(read=hub_read(cfg, source), shuffle_trees=False, provenance=prov, **options)
        return _grouped(samples, "message_tree_id"), prov
    return _primer_samples(s["jsonl"], prov), prov


def _grouped(samples: Iterable, key: str) -> Iterator:
    from dataclasses import replace

    for sample in samples:
        yield replace(sample, meta={**sample.meta, "group": sample.meta[key]})


def _primer_samples(path: str, prov: dict) -> Iterator:
    from niels_gpt.data.primer import load_primer_jsonl
    from niels_gpt.hashing import sha256_file

    samples = load_primer_jsonl(path)
    prov.update({"path": str(path), "sha256": sha256_file(path), "num_examples": len(samples)})
    yield from _grouped(samples, "index")


def wikitext_lines(
    cfg: dict, provenance: dict | None = None, *, lazy: bool = False
) -> dict[str, list[str]] | dict[str, Iterator[str]]:
    """{"train", "val", "test"} -> the non-empty lines of each wikitext split (the wiki byte stream);
    `provenance` (if given) gets each key's record of what was read (dataset, split, the commit).
    `lazy`: one-pass iterators, read when iterated (`load_wikitext`)."""
    from niels_gpt.data.wikitext import load_wikitext

    s = cfg["sources"]["wikitext"]
    splits = {"train": s["train_split"], "val": s["val_split"], "test": "test"}
    return load_wikitext(read=hub_read(cfg, "wikitext"), splits=splits, provenance=provenance, lazy=lazy)


def source_input_files(cfg: dict, source: str) -> list[str]:
    """Local files a pretrain or SFT source reads, sorted ([] for a hub source outside demo). Glob only."""
    _check(source, PRETRAIN_SOURCES + SFT_SOURCES, "")
    if source in HUB_SOURCES:
        if not cfg["demo"]:
            return []
        splits = data_files_by_split(cfg["sources"][source]["demo_data_files"]).values()
        return sorted({f for patterns in splits for p in patterns for f in glob.glob(p, recursive=True)})
    if source == "roam":
        from niels_gpt.data.roam import find_notes

        root = Path(roam_root(cfg))
        return sorted(find_notes(root)) if root.is_dir() else []
    return [cfg["sources"]["primer"]["jsonl"]]


def stream_input_files(cfg: dict, stream: str) -> list[str]:
    """Local files a byte stream reads: the primer text file, or those of its config section's source."""
    _check(stream, STREAM_SOURCES, "stream ")
    if stream == "primer":
        return [cfg["sources"]["primer"]["text"]]
    return source_input_files(cfg, STREAM_CONFIG[stream])
