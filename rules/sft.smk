# SFT caches for dolly15k, oasst1 and primer: one renderer (niels_gpt.chat_template), one writer.
# {split}_tokens.bin holds uint16 ids of whole examples back to back, {split}_idx.npy their int64
# start offsets; the assistant-only loss mask is recomputed from the special ids at read time.
# `sft` writes the raw cache (cache/curation/raw/sft/{source}/); rules/curation.smk curates it into cache/sft/.

from niels_gpt.data.registry import SFT_SOURCES, source_input_files
from niels_gpt.layout import RAW_DIR
from niels_gpt.layout import FORMAT_VERSION

SFT_DIR = layout.sft_dir(CACHE, "{source}")
RAW_SFT_DIR = layout.sft_dir(f"{CACHE}/{RAW_DIR}", "{source}")  # the build's raw cache; curated into SFT_DIR
# Every declared output of every SFT source: inputs of the report jobs that read them, and of cache/all.
SFT_TARGETS = [f"{layout.sft_dir(CACHE, s)}/{name}" for s in SFT_SOURCES for name in layout.sft_file_names()]


rule sft:
    input:
        model=TOKENIZER_MODEL,
        files=source_inputs(source_input_files),
    output:
        train_tokens=f"{RAW_SFT_DIR}/{layout.sft_tokens_name('train')}",
        train_idx=f"{RAW_SFT_DIR}/{layout.sft_offsets_name('train')}",
        val_tokens=f"{RAW_SFT_DIR}/{layout.sft_tokens_name('val')}",
        val_idx=f"{RAW_SFT_DIR}/{layout.sft_offsets_name('val')}",
        meta=f"{RAW_SFT_DIR}/{layout.META}",
    wildcard_constraints:
        source="|".join(SFT_SOURCES),
    params:
        spec=source_spec("seed", "demo", "sft.t_max"),
        unnameable=source_unnameable(source_input_files),
        format_version=FORMAT_VERSION,
    threads: 2
    priority: CHAIN_PRIORITY
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/sft/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/sft/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-sft --source {wildcards.source} --tokenizer {input.model}"
        " --out-dir $(dirname {output.meta}) --num-threads {threads} --spec {params.spec:q} {HUB_SETTINGS} > {log} 2>&1"
