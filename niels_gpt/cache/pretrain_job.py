"""Build one source's pretrain cache from the validated config: config -> loader -> writer.

`build_pretrain_source(cfg, "fineweb_edu", tokenizer_path=..., out_dir=...)` reads
`niels_gpt.data.registry.pretrain_input(cfg, source)`: a "stream" input (fineweb_edu, gutenberg) goes
through the seeded single-stream split of `build_pretrain_cache`, a "presplit" one (wikitext, roam)
through `build_pretrain_cache_presplit`. Values come from `sources.<source>.*` (max_train_tokens,
max_val_tokens, val_doc_prob, shuffle_buffer), `pretrain.shard_bytes` and `seed`. A disabled source
(`sources.<source>.enabled: false`) gets seed 000's "not built" meta.json and empty train/ and val/.
`part=k, num_parts=N` (N > 1; streamed sources only) builds part k of the scale-out into `out_dir`:
part k of the stream, budgets and split seed from pretrain_parts (part_budget, part_seed), the part
recorded in meta's provenance["part"]; pretrain_parts.merge_pretrain_parts joins the N parts.
Used by the `build-pretrain` CLI, `build-all` and the Snakemake rules.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from niels_gpt.cache.pretrain_writer import (
    DEFAULT_VAL_DOC_PROB,
    build_pretrain_cache,
    build_pretrain_cache_presplit,
    write_not_built_meta,
)

PRETRAIN_SOURCES = ("fineweb_edu", "wikitext", "gutenberg", "roam")


def _load_input(cfg: dict, source: str):
    """The registry's PretrainInput (kind, stream, train, val, provenance); separate so tests can replace it."""
    from niels_gpt.data.registry import pretrain_input

    return pretrain_input(cfg, source)


def _load_part_input(cfg: dict, source: str, num_parts: int, part: int):
    """Part `part` of `num_parts` of a streamed source's input; separate so tests can replace it."""
    from niels_gpt.data.registry import pretrain_input

    return pretrain_input(cfg, source, num_parts=num_parts, part=part)


def _check_part(source: str, scfg: dict, num_parts: int, part: int | None) -> None:
    from niels_gpt.data.registry import SPLIT_SOURCES

    if num_parts < 1 or (part is not None and not 0 <= part < num_parts):
        raise ValueError(f"--part must be in 0..{num_parts - 1} for --num-parts {num_parts}, got {part}")
    if num_parts == 1:
        return
    if part is None:
        raise ValueError(f"num_parts={num_parts}: give the part to build (--part 0..{num_parts - 1})")
    if source not in SPLIT_SOURCES:
        raise ValueError(f"{source} is built as one job; only {', '.join(SPLIT_SOURCES)} split into parts")
    if not scfg.get("enabled", True):
        raise ValueError(f"sources.{source}.enabled is false: a disabled source is not split into parts; "
                         "build it without --part (that writes its 'not built' meta.json)")  # fmt: skip


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def summary_lines(meta: dict) -> list[str]:
    """One line per split, e.g. `train: 1,234,567 tokens in 1 shard (812 documents)`."""
    lines = []
    for split in ("train", "val"):
        shards = (meta.get("shards") or {}).get(split, [])
        docs = meta.get(f"{split}_documents")
        lines.append(
            f"{split}: {meta[f'{split}_tokens']:,} tokens in {_plural(len(shards), 'shard')}"
            + (f" ({_plural(docs, 'document')})" if docs is not None else "")
        )
    return lines


def build_pretrain_source(
    cfg: dict,
    source: str,
    *,
    tokenizer_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    num_threads: int = -1,
    log: Callable[[str], None] = print,
    num_parts: int = 1,
    part: int | None = None,
) -> dict:
    """Build `out_dir/{train,val}/shard_*.bin` + `out_dir/meta.json` for `source` (or for part `part` of
    `num_parts` of it); returns the meta."""
    if source not in PRETRAIN_SOURCES:
        raise ValueError(f"unknown pretrain source {source!r}; expected one of {', '.join(PRETRAIN_SOURCES)}")
    scfg = cfg["sources"][source]
    _check_part(source, scfg, num_parts, part)
    shard_bytes = cfg["pretrain"]["shard_bytes"]
    out_dir = str(out_dir)
    if not scfg.get("enabled", True):
        reason = f"sources.{source}.enabled is false"
        meta = write_not_built_meta(
            out_dir, reason=reason, dataset_name=scfg.get("dataset_id", source),
            dataset_config=scfg.get("config"), seed=cfg["seed"], shard_bytes=shard_bytes,
            provenance={"source": source},
        )
        log(f"{source}: not built ({reason}); wrote {out_dir}/meta.json")
        return meta

    from niels_gpt.tokenizer import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(tokenizer_path)  # refuses a vocabulary that does not fit uint16
    budgets, seed, what = (scfg["max_train_tokens"], scfg["max_val_tokens"]), cfg["seed"], source
    if num_parts == 1:
        inp = _load_input(cfg, source)
        provenance = {"source": source, **dict(inp.provenance or {})}
    else:
        from niels_gpt.cache.pretrain_parts import part_budget, part_record

        inp = _load_part_input(cfg, source, num_parts, part)
        record = part_record(index=part, num_parts=num_parts, seed=seed, max_train_tokens=budgets[0], max_val_tokens=budgets[1])
        provenance = {"source": source, **dict(inp.provenance or {}), "part": record}
        budgets = tuple(part_budget(b, num_parts, part) for b in budgets)
        seed, what = record["part_seed"], f"{source} part {part} of {num_parts} (split seed {record['part_seed']})"
    common = dict(
        tokenizer=tokenizer,
        max_train_tokens=budgets[0],
        max_val_tokens=budgets[1],
        shard_bytes=shard_bytes,
        seed=seed,
        shuffle_buffer=scfg.get("shuffle_buffer"),
        dataset_name=scfg.get("dataset_id", source),
        dataset_config=scfg.get("config"),
        provenance=provenance,
        num_threads=num_threads,
    )
    budget = ", ".join(
        f"{split} {'all' if b is None else format(b, ',')}"
        for split, b in (("train", common["max_train_tokens"]), ("val", common["max_val_tokens"]))
    )
    origin = "the bundled sample data (demo)" if cfg["demo"] else common["dataset_name"]
    log(f"{what}: reading {origin} ({inp.kind}{', streaming' if provenance.get('streaming') else ''}); "
        f"budgets: {budget} tokens")
    if inp.kind == "stream":
        meta = build_pretrain_cache(inp.stream, out_dir, val_doc_prob=scfg.get("val_doc_prob", DEFAULT_VAL_DOC_PROB), **common)
    elif inp.kind == "presplit":
        meta = build_pretrain_cache_presplit(inp.train, inp.val, out_dir, **common)
    else:
        raise ValueError(f"registry returned PretrainInput.kind={inp.kind!r} for {source}; expected 'stream' or 'presplit'")
    for line in summary_lines(meta):
        log(line)
    log(f"wrote {out_dir}/meta.json")
    return meta
