# Pretrain token caches: uint16 shards written streaming, documents separated by eot, exact budgets.
# The shard count is known only after the build, so the split folders are directory() outputs
# (Snakemake clears them before a rerun: no stale shards) and meta.json, written last, lists them.
# `pretrain` and `pretrain_part` write the raw cache (cache/curation/raw/pretrain/..., dedup.read_margin past
# the budgets); rules/curation.smk's curate + apply jobs write the curated copy to cache/pretrain/{source}/.
# With pretrain.num_parts > 1 the enabled streamed sources (PARTED_SOURCES) are built by pretrain_part
# (one job per part, raw; curate_pretrain_part writes its curated copy, cache/pretrain/{source}/parts/part_NNN/:
# a complete cache each) and pretrain_merge, which writes only cache/pretrain/{source}/meta.json: a manifest
# listing the parts' shards (niels_gpt/pretrain/parts.py). The parts' outputs are the merge's inputs, so a part
# rebuilt makes the merge run again.

from niels_gpt.data.registry import PRETRAIN_SOURCES, STREAMED_SOURCES, source_input_files
from niels_gpt.layout import RAW_DIR
from niels_gpt.layout import FORMAT_VERSION

PRETRAIN_DIR = layout.pretrain_dir(CACHE, "{source}")  # the rules name their files with layout's names
PART_DIR = f"{PRETRAIN_DIR}/{layout.PARTS_DIR}/{{part}}"
RAW_PRETRAIN_DIR = layout.pretrain_dir(f"{CACHE}/{RAW_DIR}", "{source}")  # the builds' raw caches
RAW_PART_DIR = f"{RAW_PRETRAIN_DIR}/{layout.PARTS_DIR}/{{part}}"
# Scale-out (pretrain.num_parts > 1): the enabled streamed sources build as part jobs + one merge;
# every other pretrain source (wikitext, roam, a disabled one) stays one `pretrain` job. Decided here,
# at parse time, so every output has exactly one producing rule.
NUM_PARTS = config["pretrain"]["num_parts"]
PARTED_SOURCES = [s for s in STREAMED_SOURCES if NUM_PARTS > 1 and config["sources"][s]["enabled"]]
WHOLE_SOURCES = [s for s in PRETRAIN_SOURCES if s not in PARTED_SOURCES]
PART_NAMES = [layout.part_name(k) for k in range(NUM_PARTS)]
# Every declared output of every pretrain source: inputs of the report jobs that read them, and of cache/all.
# A parted source's are its parts' train/, val/ and meta.json, and its manifest (meta.json).
PART_OUTPUTS = (*layout.SPLITS, layout.META)
PRETRAIN_TARGETS = [
    f"{layout.pretrain_dir(CACHE, s)}/{name}" for s in WHOLE_SOURCES for name in (*layout.SPLITS, layout.META)
]
PRETRAIN_TARGETS += expand(f"{PART_DIR}/{{name}}", source=PARTED_SOURCES, part=PART_NAMES, name=PART_OUTPUTS)
PRETRAIN_TARGETS += expand(f"{PRETRAIN_DIR}/{layout.META}", source=PARTED_SOURCES)


rule pretrain:
    input:
        model=TOKENIZER_MODEL,
        files=source_inputs(source_input_files),
    output:
        train=directory(f"{RAW_PRETRAIN_DIR}/train"),
        val=directory(f"{RAW_PRETRAIN_DIR}/val"),
        meta=f"{RAW_PRETRAIN_DIR}/{layout.META}",
    wildcard_constraints:
        source="|".join(WHOLE_SOURCES),
    params:
        spec=source_spec("seed", "demo", "pretrain.shard_bytes"),
        read_margin=config["dedup"]["read_margin"],
        format_version=FORMAT_VERSION,
        unnameable=source_unnameable(source_input_files),
    threads: 2
    priority: build_priority
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/pretrain/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/pretrain/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-pretrain --source {wildcards.source} --tokenizer {input.model}"
        " --out-dir $(dirname {output.meta}) --num-threads {threads} --read-margin {params.read_margin}"
        " --spec {params.spec:q} {HUB_SETTINGS} > {log} 2>&1"


if PARTED_SOURCES:

    rule pretrain_part:
        input:
            model=TOKENIZER_MODEL,
            files=source_inputs(source_input_files),
        output:
            train=directory(f"{RAW_PART_DIR}/train"),
            val=directory(f"{RAW_PART_DIR}/val"),
            meta=f"{RAW_PART_DIR}/{layout.META}",
        wildcard_constraints:
            source="|".join(PARTED_SOURCES),
            part="|".join(PART_NAMES),
        params:
            # not shard_bytes: the raw part's shards are curate_pretrain_part's input; its output is the cache's
            spec=source_spec("seed", "demo", "pretrain.num_parts"),
            read_margin=config["dedup"]["read_margin"],
            unnameable=source_unnameable(source_input_files),
            index=wildcard_index("part", PART_NAMES),
            format_version=FORMAT_VERSION,
        threads: 2
        priority: build_priority
        conda:
            "../environment.yml"
        log:
            f"{CACHE}/logs/pretrain/{{source}}/{{part}}.log",
        benchmark:
            f"{CACHE}/benchmarks/pretrain/{{source}}/{{part}}.tsv"
        shell:
            "{sys.executable} -m niels_gpt.cache.cli build-pretrain --source {wildcards.source} --part {params.index}"
            " --tokenizer {input.model} --out-dir $(dirname {output.meta}) --num-threads {threads}"
            " --read-margin {params.read_margin} --spec {params.spec:q} {HUB_SETTINGS} > {log} 2>&1"

    rule pretrain_merge:
        input:
            parts=expand(  # every declared output of the source's part jobs
                f"{PART_DIR}/{{name}}", part=PART_NAMES, name=PART_OUTPUTS, allow_missing=True
            ),
        output:
            meta=f"{PRETRAIN_DIR}/{layout.META}",  # the manifest: the parts' shards, nothing copied
        wildcard_constraints:
            source="|".join(PARTED_SOURCES),
        params:
            spec=config_spec("pretrain.num_parts"),
            format_version=FORMAT_VERSION,
        conda:
            "../environment.yml"
        log:
            f"{CACHE}/logs/pretrain/{{source}}.log",
        benchmark:
            f"{CACHE}/benchmarks/pretrain/{{source}}.tsv"
        shell:
            "{sys.executable} -m niels_gpt.cache.cli merge-pretrain --source {wildcards.source}"
            " --out-dir $(dirname {output.meta})"
            " --spec {params.spec:q} > {log} 2>&1"
