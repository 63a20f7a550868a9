"""The cache tree on disk: where every artifact lives and what its files are called.

    {cache}/tokenizer/spm.model, meta.json
    {cache}/pretrain/{source}/{train,val}/shard_NNNNN.bin, meta.json
    {cache}/pretrain/{source}/parts/part_NNN/...            (pretrain.num_parts > 1: one cache per part; the
                                                            source's meta.json is then a manifest of their shards,
                                                            shard_list.py, and it has no train/ val/ of its own)
    {cache}/pretrain/{source}/.resume/                      a streamed build's checkpoint (pretrain/resume.py);
                                                            removed when the build finishes
    {cache}/sft/{source}/{train,val}_tokens.bin, {train,val}_idx.npy, meta.json
    {cache}/streams/{source}_{train,val}.bin, {source}_{train,val}.meta.json
    {cache}/report/leakage.json, *.svg, leakage_table.html   the report's figures and the leakage audit
    {cache}/all                                             flag: everything above is built

Every writer, reader, inspection tool and Snakemake rule takes its names from here. A `meta.json` is
written last and removed first, so its presence means the files it lists are complete. Import-light
(the Snakefile reads it at parse time): no numpy, no torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """One family of artifacts: its folder under the cache root (also meta.json's `kind`), what its
    files hold (token ids, bytes, or a model), and the unit a reader counts in."""

    name: str
    space: str  # "tokens" (uint16 ids of the one tokenizer) | "bytes" (UTF-8 streams) | "model"
    # what a reader counts: a piece (one vocabulary id), a document (ends at an eot), an example (starts at
    # an offset), a segment (text between two separators); plural with an "s" (`info`: "1,465 documents")
    unit: str


# The one table of families: every writer, reader, inspection tool and report uses these words.
FAMILIES = {
    "tokenizer": Family("tokenizer", space="model", unit="piece"),
    "pretrain": Family("pretrain", space="tokens", unit="document"),
    "sft": Family("sft", space="tokens", unit="example"),
    "streams": Family("streams", space="bytes", unit="segment"),
}

# The default cache folders (config cache_dir: null): the real build's, and the demo's beside it, so the demo
# command never replaces a real build (nor the real command a demo).
CACHE_DIR = "cache"
DEMO_CACHE_DIR = "cache-demo"


def other_build_problem(cache_dir: str, demo: bool, words: list[str]) -> str | None:
    """Why command-line `words` name the other build's default folder (a demo run naming cache/all, a real
    run naming cache-demo/...), or None. A cache_dir set by hand is the user's choice: never a problem."""
    if cache_dir not in (CACHE_DIR, DEMO_CACHE_DIR):
        return None
    other = CACHE_DIR if cache_dir == DEMO_CACHE_DIR else DEMO_CACHE_DIR
    wrong = sorted({w for w in words if w == other or w.startswith(other + "/")})
    if not wrong:
        return None
    how = "drop demo=true" if demo else "add --config demo=true"
    return (
        f"{', '.join(wrong)}: with demo={str(demo).lower()} the caches live in {cache_dir}/, not {other}/ (the demo "
        f"and the real build never share a folder): name {cache_dir}/... targets, give no target (the default "
        f"is {cache_dir}/all), or {how}"
    )


SPLITS = ("train", "val")
META = "meta.json"
TOKENIZER_MODEL = "spm.model"
ALL_FLAG = "all"
PARTS_DIR = "parts"  # beside train/ and val/: a split's files are those meta.json lists (shard_list.py)
# beside train/ and val/ too: not an output of the Snakemake job, so a failed job's cleanup keeps it; a
# dot folder, so the cache-tree walker never takes it for an artifact
RESUME_DIR = ".resume"
SHARD_GLOB = "shard_*.bin"
STREAM_BIN_SUFFIX = ".bin"
STREAM_META_SUFFIX = ".meta.json"

# Bump when a builder writes different bytes for the same inputs: the rules pass these as params, so
# users' caches rebuild on purpose when the code changes their bytes, not on every checkout.
# 5: pretrain and SFT caches are curated copies of raw builds (niels_gpt/curation); a parted source's meta.json
#    is a manifest of its parts' shards (no train/ val/ of its own), the curated parts' shards rotating at
#    pretrain.shard_bytes. 4: a single stream's split rule draws from numpy.random.default_rng
FORMAT_VERSION = 5
TOKENIZER_FORMAT_VERSION = 4  # the tokenizer's bytes did not change with format 5
STREAM_FORMAT_VERSION = 3
REPORT_FORMAT_VERSION = 1  # the report's figures and leakage.json (niels_gpt/report)
CURATION_FORMAT_VERSION = 1  # curate's decisions, summary.json and the certificate (niels_gpt/curation)

# The report's files by family: each family is one job that reads only that family's caches, so a
# figure is redrawn only when a cache it shows changes. SVG: text stays text, and the bytes are
# reproducible (matplotlib's hash salt and date are pinned).
REPORT_FIGURES = {
    "pretrain": ("pretrain_tokens.svg", "pretrain_doc_lengths.svg"),
    "sft": ("sft_lengths.svg", "sft_supervision.svg", "sft_mix.svg"),
    "tokenizer": ("tokenizer_bytes_per_token.svg", "tokenizer_vocab_use.svg"),
    "streams": ("streams_mix.svg",),
    "leakage": ("leakage.svg", "leakage_table.html"),
}
LEAKAGE_JSON = "leakage.json"
LEAKAGE_SPACES = ("tokens", "bytes")  # the audit's spaces: token ids (pretrain, SFT), bytes (the streams)
LEAKAGE_PART = "leakage_{space}.json"  # one space's part of the audit (tokens, bytes), joined into LEAKAGE_JSON

PathLike = str | os.PathLike


def _join(*parts: PathLike) -> str:
    return "/".join(os.fspath(p) for p in parts)


def tokenizer_dir(cache: PathLike) -> str:
    return _join(cache, "tokenizer")


def tokenizer_model(cache: PathLike) -> str:
    return _join(cache, "tokenizer", TOKENIZER_MODEL)


def pretrain_dir(cache: PathLike, source: str) -> str:
    return _join(cache, "pretrain", source)


def sft_dir(cache: PathLike, source: str) -> str:
    return _join(cache, "sft", source)


def streams_dir(cache: PathLike) -> str:
    return _join(cache, "streams")


def report_dir(cache: PathLike) -> str:
    return _join(cache, "report")


def resume_dir(out_dir: PathLike) -> str:
    """The checkpoint folder of the pretrain build writing `out_dir` (a source's or a part's folder)."""
    return _join(out_dir, RESUME_DIR)


def shard_name(index: int) -> str:
    return f"shard_{index:05d}.bin"


def part_name(index: int) -> str:
    return f"part_{index:03d}"


def sft_tokens_name(split: str) -> str:
    """uint16 ids of whole rendered examples, back to back."""
    return f"{split}_tokens.bin"


def sft_offsets_name(split: str) -> str:
    """int64 start offset of every example (np.save)."""
    return f"{split}_idx.npy"


def sft_file_names() -> list[str]:
    """Every file an SFT cache holds, meta.json first (the order a rebuild removes them in)."""
    return [META] + [name(split) for split in SPLITS for name in (sft_tokens_name, sft_offsets_name)]


def stream_stem(source: str, split: str) -> str:
    return f"{source}_{split}"


def stream_bin(streams: PathLike, source: str, split: str) -> str:
    return _join(streams, stream_stem(source, split) + STREAM_BIN_SUFFIX)


def stream_meta(streams: PathLike, source: str, split: str) -> str:
    return _join(streams, stream_stem(source, split) + STREAM_META_SUFFIX)


def stream_meta_beside(bin_path: PathLike) -> str | None:
    """The .meta.json of the stream whose .bin is `bin_path` (None if it is not named like one)."""
    path = str(bin_path)
    return path[: -len(STREAM_BIN_SUFFIX)] + STREAM_META_SUFFIX if path.endswith(STREAM_BIN_SUFFIX) else None


# -- curation (niels_gpt/curation): here, not there, so that the Snakefile's parse imports no curation code ---
RAW_DIR = "curation/raw"  # under the cache dir: the source builds' raw caches, curate's inputs


def decisions_dir(cache_dir) -> str:
    return f"{cache_dir}/curation/decisions"


def decisions_path(cache_dir, family: str, source: str, part: str | None = None) -> str:
    return f"{decisions_dir(cache_dir)}/{family}/{source}" + (f"/{part}" if part else "") + ".json"


def summary_path(cache_dir) -> str:
    return f"{cache_dir}/curation/summary.json"


def waived_path(cache_dir) -> str:
    """The protected n-gram hashes waived as boilerplate (sorted uint64, .npy): the certificate skips them."""
    return f"{cache_dir}/curation/waived_ngrams.npy"
