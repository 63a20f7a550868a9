# Helpers shared by every rule file: validated config, the spec each job depends on, target lists.
# Runs at parse time on every invocation (including -n): keep it cheap - no hub calls, no torch.

import json
import os
import sys

from niels_gpt.cache.formats import FORMAT_VERSION
from niels_gpt.config import ConfigError, prepare_config
from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES, SPLIT_SOURCES, source_input_files


try:
    _validated = prepare_config(dict(config), source="config.yaml + --config")
except ConfigError as err:
    sys.exit(str(err))
config.clear()
config.update(_validated)

CACHE = config["cache_dir"]
STREAM_SOURCES = config["streams"]["enabled_sources"]
TOKENIZER_MODEL = f"{CACHE}/tokenizer/spm.model"
ALL_FLAG = f"{CACHE}/all"
SFT_FILES = ("train_tokens.bin", "train_idx.npy", "val_tokens.bin", "val_idx.npy", "meta.json")

# Keys of a pretrain source that decide which text the tokenizer samples (budgets do not).
TOKENIZER_SOURCE_KEYS = (
    "enabled", "dataset_id", "config", "split", "train_split", "revision",
    "shuffle_buffer", "demo_data_files", "root", "demo_root", "val_frac",
)


def spec_json(values):
    """One canonical JSON string per job: changing any value in it re-runs exactly that job."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def source_files(source):
    """Local files a source reads (demo data, roam notes, primer files); [] for a hub source."""
    return source_input_files(config, source)


def tokenizer_spec():
    sources = {
        name: {k: v for k, v in config["sources"][name].items() if k in TOKENIZER_SOURCE_KEYS}
        for name in PRETRAIN_SOURCES
    }
    return spec_json({"seed": config["seed"], "demo": config["demo"], "tokenizer": config["tokenizer"], "sources": sources})


def tokenizer_inputs():
    path = config["tokenizer"]["model_path"]
    return [path] if path else []


def pretrain_spec(wildcards):
    s = wildcards.source
    return spec_json({
        "seed": config["seed"], "demo": config["demo"], "pretrain": {"shard_bytes": config["pretrain"]["shard_bytes"]},
        "sources": {s: config["sources"][s]},
    })


def pretrain_inputs(wildcards):
    return source_files(wildcards.source)


# Scale-out (pretrain.num_parts > 1): the enabled streamed sources build as part jobs + one merge;
# every other pretrain source (wikitext, roam, a disabled one) stays one `pretrain` job. Decided here,
# at parse time, so every output has exactly one producing rule.
NUM_PARTS = config["pretrain"]["num_parts"]
PARTED_SOURCES = [s for s in SPLIT_SOURCES if NUM_PARTS > 1 and config["sources"][s]["enabled"]]
WHOLE_SOURCES = [s for s in PRETRAIN_SOURCES if s not in PARTED_SOURCES]
PART_IDS = [f"{k:03d}" for k in range(NUM_PARTS)]


def pretrain_part_spec(wildcards):
    """A part depends on the source, seed, demo and num_parts (its budget share and slice), not on
    pretrain.shard_bytes: parts use the default shard size, and only the merge re-shards."""
    s = wildcards.source
    return spec_json({
        "seed": config["seed"], "demo": config["demo"], "pretrain": {"num_parts": NUM_PARTS},
        "sources": {s: config["sources"][s]},
    })


def pretrain_merge_spec(wildcards):
    return spec_json({"pretrain": {"shard_bytes": config["pretrain"]["shard_bytes"], "num_parts": NUM_PARTS}})


def pretrain_part_outputs(wildcards):
    """Every declared output of the source's part jobs: the merge's inputs."""
    return [
        f"{CACHE}/pretrain/{wildcards.source}/parts/part_{k}/{name}" for k in PART_IDS for name in ("train", "val", "meta.json")
    ]


def sft_spec(wildcards):
    s = wildcards.source
    return spec_json({
        "seed": config["seed"], "demo": config["demo"], "sft": {"t_max": config["sft"]["t_max"]},
        "sources": {s: config["sources"][s]},
    })


def sft_inputs(wildcards):
    return source_files(wildcards.source)


STREAM_CONFIG_SOURCE = {"wiki": "wikitext", "roam": "roam", "primer": "primer"}
STREAM_INPUT_SOURCE = {"wiki": "wikitext", "roam": "roam", "primer": "primer_text"}


def stream_spec(wildcards):
    s = STREAM_CONFIG_SOURCE[wildcards.source]
    streams = {k: config["streams"][k] for k in ("doc_separator", "T", "enabled_sources", "required_sources")}
    return spec_json({
        "seed": config["seed"], "demo": config["demo"], "streams": streams, "sources": {s: config["sources"][s]},
    })


def stream_inputs(wildcards):
    return source_files(STREAM_INPUT_SOURCE[wildcards.source])


# Every declared output of every job behind cache/all (not just the meta.json files), so that the
# flag check below notices any one of them missing.
ALL_TARGETS = (
    [TOKENIZER_MODEL, f"{CACHE}/tokenizer/meta.json"]
    + [f"{CACHE}/pretrain/{s}/{name}" for s in PRETRAIN_SOURCES for name in ("train", "val", "meta.json")]
    + [f"{CACHE}/sft/{s}/{name}" for s in SFT_SOURCES for name in SFT_FILES]
    + [f"{CACHE}/streams/{s}_{split}{ext}" for s in STREAM_SOURCES for split in ("train", "val") for ext in (".bin", ".meta.json")]
)

# Snakemake does not look behind an existing flag for artifacts deleted by hand or by a failed
# rebuild; drop the flag whenever one is missing so the next run rebuilds what is gone.
if os.path.exists(ALL_FLAG) and not all(os.path.exists(t) for t in ALL_TARGETS):
    os.remove(ALL_FLAG)
