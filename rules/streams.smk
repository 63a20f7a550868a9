# Byte streams: utf-8 bytes of wiki, roam and primer text per split, for byte-level models. No tokenizer involved. Inputs are the roam notes / data/primer.txt (wiki: the demo
# parquet files, or the hub spec in params), so editing one roam note rebuilds the roam streams only.


rule streams:
    input:
        stream_inputs,
    output:
        train=layout.stream_bin(STREAMS_DIR, "{source}", "train"),
        train_meta=layout.stream_meta(STREAMS_DIR, "{source}", "train"),
        val=layout.stream_bin(STREAMS_DIR, "{source}", "val"),
        val_meta=layout.stream_meta(STREAMS_DIR, "{source}", "val"),
    wildcard_constraints:
        source="|".join(STREAM_SOURCES),
    params:
        spec=stream_spec,
        unnameable=stream_unnameable,
        format_version=STREAM_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/streams/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/streams/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-streams --source {wildcards.source}"
        " --out-dir $(dirname {output.train}) --spec {params.spec:q} > {log} 2>&1"
