# Curation between the per-source builds and the caches training reads (niels_gpt/curation):
#   pretrain, pretrain_part, sft   -> {cache}/curation/raw/...          (raw caches; pretrain.smk, sft.smk)
#   curate                         -> {cache}/curation/decisions/...json, summary.json (one global job)
#   curate_pretrain(_part), curate_sft -> the usual cache paths            (one apply job per raw cache)
#   certificate                    -> {cache}/report/certificate.json   (0 shared n-grams, or the build fails)
# curate reads every raw cache, the val splits and decontamination.benchmarks; each apply job reads its raw
# cache and its own decisions file, so pretrain_merge, the report and training read curated caches unchanged.

from niels_gpt.layout import CURATION_FORMAT_VERSION, decisions_path, summary_path, waived_path

RAW_FOLDERS = {  # (family, source, part) -> raw cache folder, every one the builds write
    **{("pretrain", s, None): layout.pretrain_dir(f"{CACHE}/{RAW_DIR}", s) for s in WHOLE_SOURCES},
    **{
        ("pretrain", s, p): f"{layout.pretrain_dir(f'{CACHE}/{RAW_DIR}', s)}/{layout.PARTS_DIR}/{p}"
        for s in PARTED_SOURCES
        for p in PART_NAMES
    },
    **{("sft", s, None): layout.sft_dir(f"{CACHE}/{RAW_DIR}", s) for s in SFT_SOURCES},
}
RAW_FILES = [
    f"{folder}/{name}"
    for (family, _, _), folder in RAW_FOLDERS.items()
    for name in ((*layout.SPLITS, layout.META) if family == "pretrain" else layout.sft_file_names())
]
DECISIONS = [decisions_path(CACHE, f, s, p) for f, s, p in RAW_FOLDERS]
CURATION_SUMMARY = summary_path(CACHE)
WAIVED_NGRAMS = waived_path(CACHE)
CERTIFICATE = f"{REPORT_DIR}/certificate.json"
CURATION_TABLE = f"{REPORT_DIR}/curation_table.html"
BENCHMARK_FILES = config["decontamination"]["benchmarks"]
CURATION_KEYS = ("cache_dir", "dedup", "decontamination", "leakage.n_tokens")


rule curate:
    input:
        model=TOKENIZER_MODEL,
        raw=RAW_FILES,
        benchmarks=BENCHMARK_FILES,
    output:
        decisions=DECISIONS,
        waived=WAIVED_NGRAMS,
        summary=CURATION_SUMMARY,
    params:
        spec=config_spec(*CURATION_KEYS, "sources", "pretrain.num_parts"),  # sources: the final budgets
        folders=sorted(RAW_FOLDERS.values()),
        format_version=CURATION_FORMAT_VERSION,
    threads: 2
    priority: CHAIN_PRIORITY
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/curation/curate.log",
    benchmark:
        f"{CACHE}/benchmarks/curation/curate.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli curate --raw {params.folders} --tokenizer {input.model}"
        " --num-threads {threads} --spec {params.spec:q} > {log} 2>&1"


rule curate_pretrain:
    input:
        train=f"{RAW_PRETRAIN_DIR}/train",
        val=f"{RAW_PRETRAIN_DIR}/val",
        meta=f"{RAW_PRETRAIN_DIR}/{layout.META}",
        decisions=decisions_path(CACHE, "pretrain", "{source}"),
    output:
        train=directory(f"{PRETRAIN_DIR}/train"),
        val=directory(f"{PRETRAIN_DIR}/val"),
        meta=f"{PRETRAIN_DIR}/{layout.META}",
    wildcard_constraints:
        source="|".join(WHOLE_SOURCES),
    params:
        spec=config_spec(*CURATION_KEYS, "pretrain.shard_bytes"),
        format_version=FORMAT_VERSION,
    priority: CHAIN_PRIORITY
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/curation/pretrain/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/curation/pretrain/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli apply-curation --family pretrain --raw $(dirname {input.meta})"
        " --decisions {input.decisions} --out-dir $(dirname {output.meta}) --spec {params.spec:q} > {log} 2>&1"


if PARTED_SOURCES:

    rule curate_pretrain_part:
        input:
            train=f"{RAW_PART_DIR}/train",
            val=f"{RAW_PART_DIR}/val",
            meta=f"{RAW_PART_DIR}/{layout.META}",
            decisions=decisions_path(CACHE, "pretrain", "{source}", "{part}"),
        output:
            train=directory(f"{PART_DIR}/train"),
            val=directory(f"{PART_DIR}/val"),
            meta=f"{PART_DIR}/{layout.META}",
        wildcard_constraints:
            source="|".join(PARTED_SOURCES),
            part="|".join(PART_NAMES),
        params:
            spec=config_spec(*CURATION_KEYS, "pretrain.shard_bytes"),
            format_version=FORMAT_VERSION,
        priority: CHAIN_PRIORITY
        conda:
            "../environment.yml"
        log:
            f"{CACHE}/logs/curation/pretrain/{{source}}/{{part}}.log",
        benchmark:
            f"{CACHE}/benchmarks/curation/pretrain/{{source}}/{{part}}.tsv"
        shell:
            "{sys.executable} -m niels_gpt.cache.cli apply-curation --family pretrain --raw $(dirname {input.meta})"
            " --decisions {input.decisions} --out-dir $(dirname {output.meta}) --spec {params.spec:q} > {log} 2>&1"


rule curate_sft:
    input:
        raw=expand(f"{RAW_SFT_DIR}/{{name}}", name=layout.sft_file_names(), allow_missing=True),
        meta=f"{RAW_SFT_DIR}/{layout.META}",
        decisions=decisions_path(CACHE, "sft", "{source}"),
    output:
        train_tokens=f"{SFT_DIR}/{layout.sft_tokens_name('train')}",
        train_idx=f"{SFT_DIR}/{layout.sft_offsets_name('train')}",
        val_tokens=f"{SFT_DIR}/{layout.sft_tokens_name('val')}",
        val_idx=f"{SFT_DIR}/{layout.sft_offsets_name('val')}",
        meta=f"{SFT_DIR}/{layout.META}",
    wildcard_constraints:
        source="|".join(SFT_SOURCES),
    params:
        spec=config_spec(*CURATION_KEYS),
        format_version=FORMAT_VERSION,
    priority: CHAIN_PRIORITY
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/curation/sft/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/curation/sft/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli apply-curation --family sft --raw $(dirname {input.meta})"
        " --decisions {input.decisions} --out-dir $(dirname {output.meta}) --spec {params.spec:q} > {log} 2>&1"


# The certificate is the leakage audit's scan of the token space against the protected sets, so the same job
# writes the audit's token part (leakage_tokens.json): the curated train splits are scanned once.
rule certificate:
    input:
        model=TOKENIZER_MODEL,
        caches=PRETRAIN_TARGETS + SFT_TARGETS,
        summary=CURATION_SUMMARY,
        waived=WAIVED_NGRAMS,
        benchmarks=BENCHMARK_FILES,
    output:
        json=CERTIFICATE,
        table=report(CURATION_TABLE, caption="report/curation_table.rst", category="Curation"),
        leakage=LEAKAGE_TOKENS_PART,
    params:
        spec=config_spec(*CURATION_KEYS, "leakage.top_units"),
        format_version=CURATION_FORMAT_VERSION,
    threads: 2
    priority: CHAIN_PRIORITY
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/certificate.log",
    benchmark:
        f"{CACHE}/benchmarks/report/certificate.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli certify --out {output.json} --table {output.table}"
        " --summary {input.summary} --waived {input.waived} --tokenizer {input.model} --num-threads {threads}"
        " --leakage-part {output.leakage} --spec {params.spec:q} > {log} 2>&1"
