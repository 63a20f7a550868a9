# SentencePiece tokenizer: 16,000 ordinary pieces + the 4 chat specials (control symbols), trained on
# a seeded, size-capped sample of the enabled pretrain sources, or adopted from tokenizer.model_path.
# Inputs are the config values in params.spec (which sources, which datasets, which sizes), not the
# sample files' contents: retraining the tokenizer invalidates every cache, so editing a note does
# not do it (force with `snakemake -R tokenizer`). Trainer threads come from tokenizer.num_threads,
# not from -j: the unigram trainer's result depends on its thread count.

from niels_gpt.data.registry import PRETRAIN_SOURCES
from niels_gpt.layout import TOKENIZER_FORMAT_VERSION

TOKENIZER_META = f"{layout.tokenizer_dir(CACHE)}/{layout.META}"
TOKENIZER_INPUTS = [config["tokenizer"]["model_path"]] if config["tokenizer"]["model_path"] else []
# Keys of a pretrain source that decide which text the tokenizer samples (budgets do not).
TOKENIZER_SOURCE_KEYS = (
    "enabled", "dataset_id", "config", "split", "train_split", "revision",
    "shuffle_buffer", "demo_data_files", "root", "demo_root", "val_frac", "strip_boilerplate",
)
TOKENIZER_SOURCES = {
    name: {k: v for k, v in config["sources"][name].items() if k in TOKENIZER_SOURCE_KEYS}
    for name in PRETRAIN_SOURCES
}


rule tokenizer:
    input:
        TOKENIZER_INPUTS,
    output:
        model=TOKENIZER_MODEL,
        meta=TOKENIZER_META,
    params:
        spec=spec_json({**config_values("seed", "demo", "tokenizer"), "sources": TOKENIZER_SOURCES}),
        format_version=TOKENIZER_FORMAT_VERSION,
    threads: config["tokenizer"]["num_threads"]
    priority: CHAIN_PRIORITY
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/tokenizer.log",
    benchmark:
        f"{CACHE}/benchmarks/tokenizer.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-tokenizer --out-dir $(dirname {output.model})"
        " --spec {params.spec:q} {HUB_SETTINGS} > {log} 2>&1"
