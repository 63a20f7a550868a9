"""Build one SFT source's cache from the configuration: `{cache_dir}/sft/{source}/`.

`build_sft_source(cfg, source, tokenizer_path=..., out_dir=...)` is what `build-sft`,
`build-sft-primer`, `build-all` and the Snakemake `sft` rule run. It reads the source through the
loader registry (`registry.sft_input(cfg, source) -> (Iterator[ChatSample], provenance)`; every
`ChatSample.meta["group"]` is the split group: tree id for oasst1, row/line index for dolly15k and
primer) and hands it to the one writer (`writer.build_sft_cache`) with
`sources.<source>.val_frac`, `sources.<source>.truncation`, `sft.t_max` and `seed`.

The samples are buffered (a list) so the group keys are known before the split: SFT sets are small.
The previous cache is removed before the input is read, so bad input (e.g. a malformed primer line,
reported by the loader as "file:line: reason") leaves no cache behind.
A disabled source writes empty split files and a meta.json with `built: false`, so every declared
output exists and readers refuse it with the reason.
"""

from __future__ import annotations

import contextlib
import os

from niels_gpt import layout
from niels_gpt.data import registry
from niels_gpt.meta import is_built
from niels_gpt.sft.windows import format_reasons
from niels_gpt.sft.writer import build_sft_cache, remove_outputs, write_not_built


def _dataset_name(cfg: dict, source: str) -> str:
    scfg = cfg["sources"][source]
    if "dataset_id" in scfg:
        return scfg["dataset_id"]
    return scfg.get("jsonl", source)  # primer: the local file


def _group_keys(samples: list, source: str) -> list:
    keys = []
    for i, s in enumerate(samples):
        try:
            keys.append(s.meta["group"])
        except (AttributeError, KeyError, TypeError):
            raise ValueError(
                f"{source} sample {i}: meta has no 'group' (the split group key the loader must set: "
                "tree id for oasst1, row/line index otherwise)"
            ) from None
    return keys


def build_sft_source(cfg: dict, source: str, *, tokenizer_path: str, out_dir: str, num_threads: int = -1) -> dict:
    """Build (or mark "not built") the SFT cache of `source` in `out_dir` with `num_threads` rendering
    workers (-1 = every available CPU); returns its meta."""
    from niels_gpt.tokenizer import SentencePieceTokenizer

    if source not in registry.SFT_SOURCES:
        raise ValueError(f"unknown SFT source {source!r}; choose one of {', '.join(registry.SFT_SOURCES)}")
    scfg = cfg["sources"][source]
    if not scfg["enabled"]:
        tokenizer = (
            SentencePieceTokenizer(tokenizer_path) if tokenizer_path and os.path.exists(tokenizer_path) else None
        )
        return write_not_built(
            out_dir,
            source=source,
            reason=f"sources.{source}.enabled is false",
            seed=cfg["seed"],
            tokenizer=tokenizer,
            dataset_name=_dataset_name(cfg, source),
        )
    tokenizer = SentencePieceTokenizer(tokenizer_path)
    created = not os.path.exists(out_dir)
    remove_outputs(out_dir)  # before reading: bad input must not leave the previous cache looking current
    try:
        samples_iter, provenance = registry.sft_input(cfg, source)
        samples = list(samples_iter)
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(out_dir)
        raise
    return build_sft_cache(
        samples,
        out_dir,
        tokenizer=tokenizer,
        val_frac=scfg["val_frac"],
        seed=cfg["seed"],
        t_max=cfg["sft"]["t_max"],
        truncation=scfg["truncation"],
        group_keys=_group_keys(samples, source),
        source=source,
        dataset_name=_dataset_name(cfg, source),
        dataset_config=None,
        provenance={**(provenance or {}), "demo": cfg["demo"], "source_config": scfg},
        num_threads=num_threads,
    )


def format_summary(meta: dict, out_dir: str) -> str:
    """A few lines for the log: examples / tokens / label tokens / dropped per split, and the paths."""
    source = meta.get("source")
    if not is_built(meta):
        return f"sft/{source}: not built ({meta.get('reason')}) -> {os.path.join(out_dir, layout.META)}"
    lines = [f"sft/{source}: T_max={meta['T_max']:,}, truncation={meta['truncation']}, split by {meta['split_by']}"]
    for split, st in meta["splits"].items():
        lines.append(
            f"  {split:5s}: {st['num_examples']:,} examples, {st['num_tokens']:,} tokens, "
            f"{st['num_label_tokens']:,} label tokens; dropped {format_reasons(st['dropped'])}; "
            f"cut to T_max+1 {format_reasons(st['cut'])}"
        )
    for name in sorted(meta["files"]):
        lines.append(f"  -> {os.path.join(out_dir, name)}")
    lines.append(f"  -> {os.path.join(out_dir, layout.META)}")
    return "\n".join(lines)
