# Pretrain token caches: uint16 shards written streaming, documents separated by eot, exact budgets.
# The shard count is known only after the build, so the split folders are directory() outputs
# (Snakemake clears them before a rerun: no stale shards) and meta.json, written last, lists them.


rule pretrain:
    input:
        model=TOKENIZER_MODEL,
        files=pretrain_inputs,
    output:
        train=directory(f"{CACHE}/pretrain/{{source}}/train"),
        val=directory(f"{CACHE}/pretrain/{{source}}/val"),
        meta=f"{CACHE}/pretrain/{{source}}/meta.json",
    wildcard_constraints:
        source="|".join(PRETRAIN_SOURCES),
    params:
        spec=pretrain_spec,
        format_version=FORMAT_VERSION,
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
