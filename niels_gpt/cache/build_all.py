"""`build-all`: every enabled cache, curated, in-process, for users without Snakemake.

    python -m niels_gpt.cache.cli build-all --cache-dir cache --seed 42 [--demo] [--no-curation]

Order, as the workflow's DAG runs it (the same functions its rules call, in one process; Snakemake adds
incremental rebuilds and parallel jobs):
  1. tokenizer (kept if `{cache-dir}/tokenizer/spm.model` exists, unless --retrain-tokenizer), and every
     decontamination.benchmarks file read once (a bad one stops the run before any cache is built);
  2. the raw pretrain caches, `dedup.read_margin` past each budget, and the raw SFT caches, under
     `{cache-dir}/curation/raw/` (a disabled source gets a "not built" meta, as in the workflow);
  3. `curate` over every raw cache: `{cache-dir}/curation/decisions/`, summary.json, waived_ngrams.npy;
  4. `apply-curation` per raw cache: the curated caches at the usual paths (`pretrain/{source}/`,
     `sft/{source}/`);
  5. the byte streams (not curated, as in the workflow);
  6. `certify`: `{cache-dir}/report/certificate.json` and curation_table.html; a train split that shares a
     protected n-gram fails the build (exit 1, one error naming the pairs), as the workflow's certificate
     job does.
The raw and curated caches, curation files, streams and certificate are byte-identical to a workflow build
of the same config and tokenizer (tests/cache/test_build_all.py compares them with the workflow's demo
build). With pretrain.num_parts > 1 the enabled streamed sources are built, curated and merged part by
part, as the workflow's part jobs do. `--no-curation`: the loaders write the pretrain and SFT caches
directly (budgets exact, nothing removed, a source built whole whatever num_parts); it writes no curation
folder and no certificate. A certificate left by an earlier build is removed first, whatever the mode: it
would describe other caches. Milestones go to stderr (niels_gpt.log).
"""

from __future__ import annotations

import argparse
import os
import time

from niels_gpt import layout
from niels_gpt.command_line import add_config_args, resolve_config
from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES, STREAMED_SOURCES
from niels_gpt.log import log
from niels_gpt.meta import is_built

CERTIFICATE = "certificate.json"  # under {cache}/report/, as rules/curation.smk names it
CURATION_TABLE = "curation_table.html"


def register(sub) -> None:
    p = sub.add_parser(
        "build-all",
        help="build the tokenizer and every curated pretrain and SFT cache and the byte streams in one process",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--cache-dir", default=None, help="output root [cache_dir; default: cache]")
    p.add_argument("--seed", type=int, default=None, help="the one seed of every split and shuffle [seed; default: 42]")
    p.add_argument("--retrain-tokenizer", action="store_true", help="train the tokenizer even if one exists")
    p.add_argument(
        "--no-curation",
        action="store_true",
        help="write the pretrain and SFT caches straight from the loaders: no dedup, no decontamination, "
        "no certificate (the raw text, budgets exact)",
    )
    add_config_args(p)
    p.set_defaults(func=run)


def _threads() -> int:
    """Every CPU this process may use (curate and certify: the result does not depend on it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run(args) -> int:
    from niels_gpt.streams.job import build_stream_from_config
    from niels_gpt.tokenizer.job import build_tokenizer

    cfg = resolve_config(args, {"cache_dir": args.cache_dir, "seed": args.seed})
    root = cfg["cache_dir"]
    started = time.time()
    model = layout.tokenizer_model(root)
    if args.retrain_tokenizer or not os.path.exists(model):
        build_tokenizer(cfg, layout.tokenizer_dir(root))
    else:
        log(f"tokenizer: keeping {model} (--retrain-tokenizer to train again)")
    _remove_certificate(root)
    if args.no_curation:
        _build_uncurated(cfg, root, model)
    else:
        _check_benchmarks(cfg)
        _build_curated(cfg, root, model)
    for source in cfg["streams"]["enabled_sources"]:
        log(f"== streams/{source}")
        build_stream_from_config(cfg, source, layout.streams_dir(root))
    if not args.no_curation:
        _certify(cfg, root, model)
    log(f"build-all: done in {time.time() - started:.1f}s -> {root}/")
    return 0


def _remove_certificate(root: str) -> None:
    """A certificate of an earlier build describes other caches: gone before this build changes them, so a
    failed certificate (or --no-curation) never leaves one that reads as this build's (as Snakemake removes a
    job's outputs before it runs)."""
    for name in (CERTIFICATE, CURATION_TABLE):
        stale = os.path.join(layout.report_dir(root), name)
        if os.path.exists(stale):
            os.remove(stale)
            log(f"removed {stale} (an earlier build's; this build writes its own, or none with --no-curation)")


def _check_benchmarks(cfg: dict) -> None:
    """Read every decontamination.benchmarks file before the builds: a bad one stops the run at once
    (BenchmarkError names the file, the line and what was expected), not after hours of tokenizing."""
    from niels_gpt.curation.benchmarks import benchmark_texts

    for path in cfg["decontamination"]["benchmarks"]:
        log(f"benchmark {path}: {len(benchmark_texts(path)):,} texts")


def _build_uncurated(cfg: dict, root: str, model: str) -> None:
    """The loaders straight into the usual cache paths (no curation)."""
    from niels_gpt.pretrain.job import build_pretrain_source
    from niels_gpt.sft.job import build_sft_source, format_summary

    for source in PRETRAIN_SOURCES:
        log(f"== pretrain/{source} (not curated)")
        build_pretrain_source(cfg, source, tokenizer_path=model, out_dir=layout.pretrain_dir(root, source))
    for source in SFT_SOURCES:
        log(f"== sft/{source} (not curated)")
        out_dir = layout.sft_dir(root, source)
        log(format_summary(build_sft_source(cfg, source, tokenizer_path=model, out_dir=out_dir), out_dir))


def _build_curated(cfg: dict, root: str, model: str) -> None:
    """Raw caches, the curation decision, then each raw cache's curated copy at the usual path (and, for a
    source split into parts, the merge's manifest), as rules/pretrain.smk, sft.smk and curation.smk do."""
    from niels_gpt.config import deep_merge, schema_defaults
    from niels_gpt.curation.apply import apply_pretrain, apply_sft
    from niels_gpt.curation.cli import settings
    from niels_gpt.curation.curate import curate
    from niels_gpt.pretrain.job import build_pretrain_source
    from niels_gpt.pretrain.parts import merge_pretrain_parts
    from niels_gpt.sft.job import build_sft_source, format_summary

    raw_root = f"{root}/{layout.RAW_DIR}"
    num_parts = cfg["pretrain"]["num_parts"]
    parted = [s for s in STREAMED_SOURCES if num_parts > 1 and cfg["sources"][s]["enabled"]]  # PARTED_SOURCES
    caches = []  # (family, source, part index or None, raw folder, curated folder), as rules/curation.smk names them
    for s in PRETRAIN_SOURCES:
        for k in range(num_parts) if s in parted else [None]:
            caches.append(("pretrain", s, k, _pretrain_dir(raw_root, s, k), _pretrain_dir(root, s, k)))
    caches += [("sft", s, None, layout.sft_dir(raw_root, s), layout.sft_dir(root, s)) for s in SFT_SOURCES]
    margin = cfg["dedup"]["read_margin"]
    # a raw part is written in the default shard size, as the pretrain_part job (whose spec leaves out
    # pretrain.shard_bytes: only its curated copy is the cache) writes it
    part_cfg = deep_merge(cfg, {"pretrain": {"shard_bytes": schema_defaults()["pretrain"]["shard_bytes"]}})
    for family, source, k, raw_dir, _ in caches:
        if family == "pretrain":
            what = source if k is None else f"{source} part {k} of {num_parts}"
            log(f"== pretrain/{what}: raw cache (read_margin {margin})")
            parts = {} if k is None else {"num_parts": num_parts, "part": k}
            build_pretrain_source(
                cfg if k is None else part_cfg,
                source,
                tokenizer_path=model,
                out_dir=raw_dir,
                read_margin=margin,
                **parts,
            )
        else:
            log(f"== sft/{source}: raw cache")
            log(format_summary(build_sft_source(cfg, source, tokenizer_path=model, out_dir=raw_dir), raw_dir))
    log("== curate: duplicates and contaminated spans of every raw cache")
    raw_dirs = sorted(raw_dir for *_, raw_dir, _ in caches)
    curate(cfg, cache_dir=root, raw_dirs=raw_dirs, tokenizer_path=model, num_threads=_threads())
    for family, source, k, raw_dir, out_dir in caches:
        decisions = layout.decisions_path(root, family, source, None if k is None else layout.part_name(k))
        log(f"== {family}/{source}{'' if k is None else f' part {k}'}: curated copy")
        if family == "pretrain":
            shard_bytes = cfg["pretrain"]["shard_bytes"]
            meta = apply_pretrain(raw_dir, out_dir, decisions, shard_bytes=shard_bytes, settings=settings(cfg))
        else:
            meta = apply_sft(raw_dir, out_dir, decisions, settings=settings(cfg))
        if is_built(meta):
            log(f"wrote {out_dir}: train {meta['train_tokens']:,} tokens, val {meta['val_tokens']:,} tokens")
    for source in parted:
        log(f"== pretrain/{source}: merging {num_parts} parts")
        out_dir = layout.pretrain_dir(root, source)
        merge_pretrain_parts(f"{out_dir}/{layout.PARTS_DIR}", out_dir, num_parts=num_parts, source=source)


def _pretrain_dir(root: str, source: str, k: int | None) -> str:
    """The cache folder of a source built whole (k None), or of its part k."""
    whole = layout.pretrain_dir(root, source)
    return whole if k is None else f"{whole}/{layout.PARTS_DIR}/{layout.part_name(k)}"


def _certify(cfg: dict, root: str, model: str) -> None:
    """0 shared n-grams between the curated train splits and the val splits / benchmarks, or an error."""
    from niels_gpt.curation.certificate import certify

    log("== certificate")
    report = layout.report_dir(root)
    certify(
        root,
        n=cfg["leakage"]["n_tokens"],
        benchmarks=cfg["decontamination"]["benchmarks"],
        tokenizer_path=model,
        summary_file=layout.summary_path(root),
        out=os.path.join(report, CERTIFICATE),
        table=os.path.join(report, CURATION_TABLE),
        num_threads=_threads(),
        required=cfg["decontamination"]["enabled"],
        waived_file=layout.waived_path(root),
    )
    log(f"wrote {report}/{CERTIFICATE}")
