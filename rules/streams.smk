# Byte streams: utf-8 bytes of wiki, roam and primer text per split, for byte-level models; no tokenizer
# involved. Inputs are the roam notes / data/primer.txt (wiki: the demo parquet files, or the hub spec in
# params), so editing one roam note rebuilds the roam streams only.

from niels_gpt.data.registry import STREAM_CONFIG, STREAM_SOURCES, stream_input_files
from niels_gpt.layout import STREAM_FORMAT_VERSION

STREAMS_DIR = layout.streams_dir(CACHE)
# Every declared output of the enabled streams: inputs of the report jobs that read them, and of cache/all.
STREAM_TARGETS = [
    path(STREAMS_DIR, s, split)
    for s in config["streams"]["enabled_sources"]
    for split in layout.SPLITS
    for path in (layout.stream_bin, layout.stream_meta)
]


rule streams:
    input:
        source_inputs(stream_input_files),
    output:
        train=layout.stream_bin(STREAMS_DIR, "{source}", "train"),
        train_meta=layout.stream_meta(STREAMS_DIR, "{source}", "train"),
        val=layout.stream_bin(STREAMS_DIR, "{source}", "val"),
        val_meta=layout.stream_meta(STREAMS_DIR, "{source}", "val"),
    wildcard_constraints:
        source="|".join(STREAM_SOURCES),
    params:
        spec=source_spec(
            "seed", "demo", "streams.doc_separator", "streams.T", "streams.enabled_sources", "streams.required_sources",
            config_source=STREAM_CONFIG,
        ),
        unnameable=source_unnameable(stream_input_files),
        format_version=STREAM_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/streams/{{source}}.log",
    benchmark:
        f"{CACHE}/benchmarks/streams/{{source}}.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli build-streams --source {wildcards.source}"
        " --out-dir $(dirname {output.train}) --spec {params.spec:q} {HUB_SETTINGS} > {log} 2>&1"
