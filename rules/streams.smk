# Byte streams (seed 002): utf-8 bytes of wiki, roam and primer text per split, for byte-level
# models. No tokenizer involved. Inputs are the roam notes / data/primer.txt (wiki: the demo
# parquet files, or the hub spec in params), so editing one roam note rebuilds the roam streams only.


rule streams:
    input:
        stream_inputs,
    output:
        train=f"{CACHE}/streams/{{source}}_train.bin",
        train_meta=f"{CACHE}/streams/{{source}}_train.meta.json",
        val=f"{CACHE}/streams/{{source}}_val.bin",
        val_meta=f"{CACHE}/streams/{{source}}_val.meta.json",
    wildcard_constraints:
        source="wiki|roam|primer",
    params:
        spec=stream_spec,
        format_version=FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/streams/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/streams/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-streams --source {wildcards.source}"
        " --out-dir $(dirname {output.train}) --spec {params.spec:q} > {log} 2>&1"
