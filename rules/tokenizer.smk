# SentencePiece tokenizer: 16,000 ordinary pieces + the 4 chat specials (control symbols), trained on
# a seeded, size-capped sample of the enabled pretrain sources, or adopted from tokenizer.model_path.
# Inputs are the config values in params.spec (which sources, which datasets, which sizes), not the
# sample files' contents: retraining the tokenizer invalidates every cache, so editing a note does
# not do it (force with `snakemake -R tokenizer`). Trainer threads come from tokenizer.num_threads,
# not from -j: the unigram trainer's result depends on its thread count.


rule tokenizer:
    input:
        tokenizer_inputs(),
    output:
        model=TOKENIZER_MODEL,
        meta=TOKENIZER_META,
    params:
        spec=tokenizer_spec(),
        format_version=FORMAT_VERSION,
    threads: config["tokenizer"]["num_threads"]
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/tokenizer.log",
    benchmark:
        f"{CACHE}/benchmarks/tokenizer.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-tokenizer --out-dir $(dirname {output.model})"
        " --spec {params.spec:q} > {log} 2>&1"
