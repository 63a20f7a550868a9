# Pretrain token caches: uint16 shards written streaming, documents separated by eot, exact budgets.
# The shard count is known only after the build, so the split folders are directory() outputs
# (Snakemake clears them before a rerun: no stale shards) and meta.json, written last, lists them.
# With pretrain.num_parts > 1 the enabled streamed sources (PARTED_SOURCES) are built by pretrain_part
# (one job per part, cache/pretrain/{source}/parts/part_NNN/) and pretrain_merge instead (niels_gpt/pretrain/parts.py).


rule pretrain:
    input:
        model=TOKENIZER_MODEL,
        files=source_inputs,
    output:
        train=directory(f"{PRETRAIN_DIR}/train"),
        val=directory(f"{PRETRAIN_DIR}/val"),
        meta=f"{PRETRAIN_DIR}/{layout.META}",
    wildcard_constraints:
        source="|".join(WHOLE_SOURCES),
    params:
        spec=pretrain_spec,
        format_version=FORMAT_VERSION,
        unnameable=source_unnameable,
    threads: 2
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/pretrain/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/pretrain/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-pretrain --source {wildcards.source} --tokenizer {input.model}"
        " --out-dir $(dirname {output.meta}) --num-threads {threads} --spec {params.spec:q} > {log} 2>&1"


if PARTED_SOURCES:

    rule pretrain_part:
        input:
            model=TOKENIZER_MODEL,
            files=source_inputs,
        output:
            train=directory(f"{PART_DIR}/train"),
            val=directory(f"{PART_DIR}/val"),
            meta=f"{PART_DIR}/{layout.META}",
        wildcard_constraints:
            source="|".join(PARTED_SOURCES),
            part="|".join(PART_NAMES),
        params:
            spec=pretrain_part_spec,
            unnameable=source_unnameable,
            index=part_index,
            format_version=FORMAT_VERSION,
        threads: 2
        conda:
            "../environment.yml"
        log:
            f"{CACHE}/logs/pretrain/{{source}}/{{part}}.log",
        benchmark:
            f"{CACHE}/benchmarks/pretrain/{{source}}/{{part}}.tsv"
        shell:
            "{sys.executable} -m niels_gpt.cache.cli build-pretrain --source {wildcards.source} --part {params.index}"
            " --tokenizer {input.model} --out-dir $(dirname {output.meta}) --num-threads {threads}"
            " --spec {params.spec:q} > {log} 2>&1"

    rule pretrain_merge:
        input:
            parts=pretrain_part_outputs,
        output:
            train=directory(f"{PRETRAIN_DIR}/train"),
            val=directory(f"{PRETRAIN_DIR}/val"),
            meta=f"{PRETRAIN_DIR}/{layout.META}",
        wildcard_constraints:
            source="|".join(PARTED_SOURCES),
        params:
            spec=pretrain_merge_spec,
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
