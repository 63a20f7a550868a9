# Shared helpers of the workflow: validated config, the spec each job depends on, target lists.
# Runs at parse time on every invocation (including -n): keep it cheap - no hub calls, no torch.

import json
import os
import sys

from niels_gpt import layout
from niels_gpt.config import ConfigError, prepare_config
from niels_gpt.data.registry import (
    PRETRAIN_SOURCES,
    SFT_SOURCES,
    STREAM_CONFIG,
    STREAM_SOURCES,
    STREAMED_SOURCES,
    source_input_files,
    stream_input_files,
)
from niels_gpt.layout import FORMAT_VERSION, REPORT_FORMAT_VERSION, STREAM_FORMAT_VERSION


try:
    _validated = prepare_config(dict(config), source="config.yaml + --config")
except ConfigError as err:
    sys.exit(str(err))
config.clear()
config.update(_validated)

CACHE = config["cache_dir"]
ENABLED_STREAMS = config["streams"]["enabled_sources"]
TOKENIZER_MODEL = layout.tokenizer_model(CACHE)
TOKENIZER_META = f"{layout.tokenizer_dir(CACHE)}/{layout.META}"
ALL_FLAG = f"{CACHE}/{layout.ALL_FLAG}"
# Output folders as wildcard patterns: the rules name their files with layout's names
PRETRAIN_DIR = layout.pretrain_dir(CACHE, "{source}")
PART_DIR = f"{PRETRAIN_DIR}/{layout.PARTS_DIR}/{{part}}"
SFT_DIR = layout.sft_dir(CACHE, "{source}")
STREAMS_DIR = layout.streams_dir(CACHE)

# Keys of a pretrain source that decide which text the tokenizer samples (budgets do not).
TOKENIZER_SOURCE_KEYS = (
    "enabled", "dataset_id", "config", "split", "train_split", "revision",
    "shuffle_buffer", "demo_data_files", "root", "demo_root", "val_frac", "strip_boilerplate",
)


def spec_json(values):
    """One canonical JSON string per job: changing any value in it re-runs exactly that job."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


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


# Snakemake reads `{name}` in an input path as a wildcard and has no escape for it there, so a file whose
# name holds a brace (a note called "{draft}.md") cannot be an input. Such files are tracked through a
# param instead: their path, size and mtime, so editing one re-runs exactly the jobs that read it.
def _nameable(path):
    return "{" not in path and "}" not in path


def input_paths(paths):
    return [p for p in paths if _nameable(p)]


def unnameable_inputs(paths):
    """{path: [size, mtime_ns]} of the files input_paths leaves out."""
    return {p: [st.st_size, st.st_mtime_ns] for p in paths if not _nameable(p) for st in [os.stat(p)]}


def source_inputs(wildcards):
    """The data files a pretrain or SFT source reads (the ones Snakemake can name)."""
    return input_paths(source_input_files(config, wildcards.source))


def source_unnameable(wildcards):
    return unnameable_inputs(source_input_files(config, wildcards.source))


# Scale-out (pretrain.num_parts > 1): the enabled streamed sources build as part jobs + one merge;
# every other pretrain source (wikitext, roam, a disabled one) stays one `pretrain` job. Decided here,
# at parse time, so every output has exactly one producing rule.
NUM_PARTS = config["pretrain"]["num_parts"]
PARTED_SOURCES = [s for s in STREAMED_SOURCES if NUM_PARTS > 1 and config["sources"][s]["enabled"]]
WHOLE_SOURCES = [s for s in PRETRAIN_SOURCES if s not in PARTED_SOURCES]
PART_NAMES = [layout.part_name(k) for k in range(NUM_PARTS)]


def pretrain_part_spec(wildcards):
    """A part depends on the source, seed, demo and num_parts (its budget share and slice), not on
    pretrain.shard_bytes: parts use the default shard size, and only the merge re-shards."""
    s = wildcards.source
    return spec_json({
        "seed": config["seed"], "demo": config["demo"], "pretrain": {"num_parts": NUM_PARTS},
        "sources": {s: config["sources"][s]},
    })


def part_index(wildcards):
    """The part number in a part folder name (part_007 -> 7)."""
    return PART_NAMES.index(wildcards.part)


def pretrain_merge_spec(wildcards):
    return spec_json({"pretrain": {"shard_bytes": config["pretrain"]["shard_bytes"], "num_parts": NUM_PARTS}})


def pretrain_part_outputs(wildcards):
    """Every declared output of the source's part jobs: the merge's inputs."""
    parts = f"{layout.pretrain_dir(CACHE, wildcards.source)}/{layout.PARTS_DIR}"
    return [f"{parts}/{part}/{name}" for part in PART_NAMES for name in (*layout.SPLITS, layout.META)]


def sft_spec(wildcards):
    s = wildcards.source
    return spec_json({
        "seed": config["seed"], "demo": config["demo"], "sft": {"t_max": config["sft"]["t_max"]},
        "sources": {s: config["sources"][s]},
    })


def stream_spec(wildcards):
    s = STREAM_CONFIG[wildcards.source]
    streams = {k: config["streams"][k] for k in ("doc_separator", "T", "enabled_sources", "required_sources")}
    return spec_json({
        "seed": config["seed"], "demo": config["demo"], "streams": streams, "sources": {s: config["sources"][s]},
    })


def stream_inputs(wildcards):
    return input_paths(stream_input_files(config, wildcards.source))


def stream_unnameable(wildcards):
    return unnameable_inputs(stream_input_files(config, wildcards.source))


# Every declared output of each cache family (not just the meta.json files): the inputs of the report
# jobs that read that family, and, with the report itself, of cache/all (so that the flag check below
# notices any one of them missing).
PRETRAIN_TARGETS = [
    f"{layout.pretrain_dir(CACHE, s)}/{name}" for s in PRETRAIN_SOURCES for name in (*layout.SPLITS, layout.META)
]
SFT_TARGETS = [f"{layout.sft_dir(CACHE, s)}/{name}" for s in SFT_SOURCES for name in layout.sft_file_names()]
STREAM_TARGETS = [
    path(layout.streams_dir(CACHE), s, split)
    for s in ENABLED_STREAMS
    for split in layout.SPLITS
    for path in (layout.stream_bin, layout.stream_meta)
]

# The report (rules/report.smk): figure paths by name (file name without extension), and leakage.json.
REPORT_DIR = layout.report_dir(CACHE)
FIGURE = {
    name.rsplit(".", 1)[0]: f"{REPORT_DIR}/{name}" for names in layout.REPORT_FIGURES.values() for name in names
}
LEAKAGE_JSON = f"{REPORT_DIR}/{layout.LEAKAGE_JSON}"


def report_spec(*keys):
    """cache_dir and the named config sections or dotted keys ("sft.mix") a report job depends on."""
    values = {"cache_dir": CACHE}
    for key in keys:
        section, _, name = key.partition(".")
        values.setdefault(section, {}).update({name: config[section][name]} if name else config[section])
    return spec_json(values)


ALL_TARGETS = [TOKENIZER_MODEL, TOKENIZER_META] + PRETRAIN_TARGETS + SFT_TARGETS + STREAM_TARGETS
ALL_TARGETS += list(FIGURE.values()) + [LEAKAGE_JSON]

# Snakemake does not look behind an existing flag for artifacts deleted by hand or by a failed
# rebuild; drop the flag whenever one is missing so the next run rebuilds what is gone.
if os.path.exists(ALL_FLAG) and not all(os.path.exists(t) for t in ALL_TARGETS):
    os.remove(ALL_FLAG)
