"""Build one source's pretrain cache from the validated config: config -> loader -> writer.

`build_pretrain_source(cfg, "fineweb_edu", tokenizer_path=..., out_dir=...)` reads
`registry.pretrain_input(cfg, source)`: a "stream" input (fineweb_edu, gutenberg) goes through the
seeded single-stream split of `build_pretrain_cache`, a "presplit" one (wikitext, roam) through
`build_pretrain_cache_presplit`. Values come from `sources.<source>.*` (max_train_tokens,
max_val_tokens, val_doc_prob, shuffle_buffer), `pretrain.shard_bytes` and `seed`. A disabled source
(`sources.<source>.enabled: false`) gets a "not built" meta.json and empty train/ and val/.
`part=k, num_parts=N` (N > 1; STREAMED_SOURCES only) builds part k of the scale-out into `out_dir`:
part k of the stream, budgets and split seed from parts.py (part_budget, part_seed), the part
recorded in meta's provenance["part"]; `parts.merge_pretrain_parts` joins the N parts.
A stream input is resumable: its checkpoint (pretrain/resume.py, `{out_dir}/.resume/`, every
`hub.checkpoint_tokens` tokens and when the hub fails) is keyed by the job's spec (`--spec`), the part, the
tokenizer sha256 and FORMAT_VERSION; a rerun of a failed build continues from it (`position`, handed to
the loader through registry.pretrain_input, is where its stream starts).
Used by the `build-pretrain` CLI, `build-all` and the Snakemake rules; milestones go to `log`
(default: niels_gpt.log.log, one line each on stderr).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from niels_gpt.data import registry
from niels_gpt.data.resumable import StreamPosition
from niels_gpt.layout import FORMAT_VERSION, META, SPLITS
from niels_gpt.log import log as log_line
from niels_gpt.pretrain.parts import part_budget, part_record
from niels_gpt.pretrain.resume import Checkpoint, remove_checkpoint
from niels_gpt.pretrain.writer import build_pretrain_cache, build_pretrain_cache_presplit, write_not_built_meta


def raw_budget(budget: int | None, margin: float) -> int | None:
    """A budget plus `margin` of it, rounded up (None = unlimited stays unlimited)."""
    return None if budget is None else budget + -(-budget * round(margin * 10**6) // 10**6)


def check_part(source: str, scfg: dict, num_parts: int, part: int | None) -> None:
    """Refuse a part number out of range, or parts of a source that is built as one job."""
    if num_parts < 1 or (part is not None and not 0 <= part < num_parts):
        raise ValueError(f"--part must be in 0..{num_parts - 1} for num_parts={num_parts}, got {part}")
    if num_parts == 1:
        return
    if part is None:
        raise ValueError(f"num_parts={num_parts}: give the part to build (--part 0..{num_parts - 1})")
    if source not in registry.STREAMED_SOURCES:
        raise ValueError(f"{source} is built as one job; only {', '.join(registry.STREAMED_SOURCES)} split into parts")
    if not scfg["enabled"]:
        raise ValueError(
            f"sources.{source}.enabled is false: a disabled source is not split into parts; "
            "build it without --part (that writes its 'not built' meta.json)"
        )


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def summary_lines(meta: dict) -> list[str]:
    """One line per split, e.g. `train: 1,234,567 tokens in 1 shard (812 documents)`."""
    lines = []
    for split in SPLITS:
        shards = (meta.get("shards") or {}).get(split, [])
        docs = meta.get(f"{split}_documents")
        lines.append(
            f"{split}: {meta[f'{split}_tokens']:,} tokens in {_plural(len(shards), 'shard')}"
            + (f" ({_plural(docs, 'document')})" if docs is not None else "")
        )
    return lines


def split_setting(source: str, scfg: dict) -> str:
    """The config value that decides which documents go to val (named when a split would be empty)."""
    if source in registry.STREAMED_SOURCES:
        return f"sources.{source}.val_doc_prob={scfg['val_doc_prob']}"
    if source == "wikitext":
        return f"sources.wikitext.val_split={scfg['val_split']!r}"
    return f"sources.{source}.val_frac={scfg['val_frac']}"


def _budget_text(budgets: tuple[int | None, int | None]) -> str:
    return ", ".join(f"{split} {'all' if b is None else format(b, ',')}" for split, b in zip(SPLITS, budgets))


def _not_built(cfg: dict, source: str, out_dir: str, dataset: dict, log: Callable[[str], None]) -> dict:
    reason = f"sources.{source}.enabled is false"
    meta = write_not_built_meta(
        out_dir,
        reason=reason,
        seed=cfg["seed"],
        shard_bytes=cfg["pretrain"]["shard_bytes"],
        provenance={"source": source},
        **dataset,
    )
    remove_checkpoint(out_dir)
    log(f"{source}: not built ({reason}); wrote {out_dir}/{META}")
    return meta


def checkpoint_key(cfg: dict, spec: dict | None, tokenizer, part: int | None) -> dict:
    """What a stream build's bytes depend on, as the job knows it before reading: its spec (the config
    values its Snakemake rule passes, `--spec`; without one the whole config but the `hub` section, whose
    retry settings never change the bytes), the part, the tokenizer's sha256 and FORMAT_VERSION."""
    values = spec if spec is not None else {k: v for k, v in cfg.items() if k != "hub"}
    return {"format_version": FORMAT_VERSION, "spec": values, "part": part, "tokenizer_sha256": tokenizer.sha256}


def build_pretrain_source(
    cfg: dict,
    source: str,
    *,
    tokenizer_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    num_threads: int = -1,
    log: Callable[[str], None] = log_line,
    num_parts: int = 1,
    part: int | None = None,
    spec: dict | None = None,
    read_margin: float = 0.0,
) -> dict:
    """Build `out_dir/{train,val}/shard_*.bin` + `out_dir/meta.json` for `source` (or for part `part` of
    `num_parts` of it); returns the meta. `spec`: the config values the job was given (`--spec`), which
    key a stream's checkpoint. `read_margin`: read this fraction past each budget (the raw build that
    curation cuts back to the budget: rules/curation.smk)."""
    if source not in registry.PRETRAIN_SOURCES:
        raise ValueError(f"unknown pretrain source {source!r}; expected one of {', '.join(registry.PRETRAIN_SOURCES)}")
    scfg = cfg["sources"][source]
    check_part(source, scfg, num_parts, part)
    out_dir = str(out_dir)
    dataset = {"dataset_name": scfg.get("dataset_id", source), "dataset_config": scfg.get("config")}
    if not scfg["enabled"]:
        return _not_built(cfg, source, out_dir, dataset, log)

    from niels_gpt.tokenizer import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(tokenizer_path)  # refuses a vocabulary that does not fit uint16
    budgets, seed, what = (scfg["max_train_tokens"], scfg["max_val_tokens"]), cfg["seed"], source
    position = StreamPosition() if source in registry.STREAMED_SOURCES else None  # where a resumed stream starts
    inp = registry.pretrain_input(cfg, source, num_parts=num_parts, part=part or 0, position=position)
    provenance = {"source": source, **inp.provenance}
    if num_parts > 1:
        record = part_record(
            index=part, num_parts=num_parts, seed=seed, max_train_tokens=budgets[0], max_val_tokens=budgets[1]
        )
        provenance["part"] = record
        budgets = tuple(part_budget(b, num_parts, part) for b in budgets)
        seed, what = record["part_seed"], f"{source} part {part} of {num_parts} (split seed {record['part_seed']})"
    if read_margin:
        budgets = tuple(raw_budget(b, read_margin) for b in budgets)
        provenance["read_margin"] = read_margin
    common = dict(
        tokenizer=tokenizer,
        max_train_tokens=budgets[0],
        max_val_tokens=budgets[1],
        shard_bytes=cfg["pretrain"]["shard_bytes"],
        seed=seed,
        shuffle_buffer=scfg.get("shuffle_buffer"),
        provenance=provenance,
        num_threads=num_threads,
        split_setting=split_setting(source, scfg),
        **dataset,
    )
    origin = "the bundled sample data (demo)" if cfg["demo"] else dataset["dataset_name"]
    streaming = ", streaming" if provenance.get("streaming") else ""
    log(f"{what}: reading {origin} ({inp.kind}{streaming}); budgets: {_budget_text(budgets)} tokens")
    if inp.kind == "stream":
        # a part may hold no val on its own; the merge checks the whole source
        check_empty = num_parts == 1
        key = checkpoint_key(cfg, spec, tokenizer, part)
        checkpoint = Checkpoint(out_dir, key, every_tokens=cfg["hub"]["checkpoint_tokens"])
        meta = build_pretrain_cache(
            inp.stream,
            out_dir,
            val_doc_prob=scfg["val_doc_prob"],
            check_empty=check_empty,
            checkpoint=checkpoint,
            position=position,
            **common,
        )
    else:
        meta = build_pretrain_cache_presplit(inp.train, inp.val, out_dir, **common)
    for line in summary_lines(meta):
        log(line)
    log(f"wrote {out_dir}/{META}")
    return meta
