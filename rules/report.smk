# The report: figures of every cache for `snakemake --report cache/report.html`, and the train/val
# leakage audit (cache/report/leakage.json). Each family's figures are one job whose inputs are
# exactly the caches it reads, so a figure is redrawn only when a cache it shows changes; the numbers
# come from the caches and their meta.json (niels_gpt/report/stats.py), never from re-tokenizing.
# Captions: rules/report/*.rst. leakage.max_fraction (null = report only) turns the audit into a gate.

from niels_gpt.layout import REPORT_FORMAT_VERSION

REPORT_DIR = layout.report_dir(CACHE)
# Figure paths by name (the file name without its extension), and the audit's leakage.json.
FIGURE = {
    name.rsplit(".", 1)[0]: f"{REPORT_DIR}/{name}" for names in layout.REPORT_FIGURES.values() for name in names
}
LEAKAGE_JSON = f"{REPORT_DIR}/{layout.LEAKAGE_JSON}"
LEAKAGE_PART = f"{REPORT_DIR}/{layout.LEAKAGE_PART}"  # one per space: {space} = tokens | bytes


rule report_pretrain:
    input:
        PRETRAIN_TARGETS,
    output:
        tokens=report(FIGURE["pretrain_tokens"], caption="report/pretrain_tokens.rst", category="Pretrain"),
        lengths=report(FIGURE["pretrain_doc_lengths"], caption="report/pretrain_doc_lengths.rst", category="Pretrain"),
    params:
        spec=config_spec("cache_dir"),
        format_version=REPORT_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/pretrain.log",
    benchmark:
        f"{CACHE}/benchmarks/report/pretrain.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli report-figures --family pretrain --out-dir $(dirname {output.tokens})"
        " --spec {params.spec:q} > {log} 2>&1"


rule report_sft:
    input:
        SFT_TARGETS,
    output:
        lengths=report(FIGURE["sft_lengths"], caption="report/sft_lengths.rst", category="SFT"),
        supervision=report(FIGURE["sft_supervision"], caption="report/sft_supervision.rst", category="SFT"),
        mix=report(FIGURE["sft_mix"], caption="report/sft_mix.rst", category="SFT"),
    params:
        spec=config_spec("cache_dir", "sft.mix"),
        format_version=REPORT_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/sft.log",
    benchmark:
        f"{CACHE}/benchmarks/report/sft.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli report-figures --family sft --out-dir $(dirname {output.mix})"
        " --spec {params.spec:q} > {log} 2>&1"


rule report_tokenizer:
    input:
        model=TOKENIZER_MODEL,
        caches=PRETRAIN_TARGETS + SFT_TARGETS,
    output:
        bpt=report(
            FIGURE["tokenizer_bytes_per_token"], caption="report/tokenizer_bytes_per_token.rst", category="Tokenizer"
        ),
        vocab=report(FIGURE["tokenizer_vocab_use"], caption="report/tokenizer_vocab_use.rst", category="Tokenizer"),
    params:
        spec=config_spec("cache_dir"),
        format_version=REPORT_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/tokenizer.log",
    benchmark:
        f"{CACHE}/benchmarks/report/tokenizer.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli report-figures --family tokenizer --tokenizer {input.model}"
        " --out-dir $(dirname {output.bpt}) --spec {params.spec:q} > {log} 2>&1"


rule report_streams:
    input:
        STREAM_TARGETS,
    output:
        mix=report(FIGURE["streams_mix"], caption="report/streams_mix.rst", category="Streams"),
    params:
        spec=config_spec("cache_dir", "streams.p_train"),
        format_version=REPORT_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/streams.log",
    benchmark:
        f"{CACHE}/benchmarks/report/streams.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli report-figures --family streams --out-dir $(dirname {output.mix})"
        " --spec {params.spec:q} > {log} 2>&1"


# The audit in two steps: one part per space, then `leakage` joins the parts into leakage.json and applies
# the gate (a new leakage.max_fraction re-runs the join alone, never a scan). The token part comes from the
# certificate's scan (rules/curation.smk: one scan of the curated train splits for both); the byte streams
# are not curated, so their part (leakage_space) runs as soon as the streams exist, beside the builds.
LEAKAGE_TOKENS_PART, LEAKAGE_BYTES_PART = (LEAKAGE_PART.format(space=space) for space in ("tokens", "bytes"))


rule leakage_space:
    input:
        STREAM_TARGETS,
    output:
        json=LEAKAGE_BYTES_PART,
    params:
        spec=config_spec("cache_dir", "leakage.n_bytes", "leakage.top_units"),
        format_version=REPORT_FORMAT_VERSION,
    threads: 2
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/leakage_bytes.log",
    benchmark:
        f"{CACHE}/benchmarks/report/leakage_bytes.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli leakage --space bytes --out {output.json}"
        " --num-threads {threads} --spec {params.spec:q} > {log} 2>&1"


rule leakage:
    input:
        parts=[LEAKAGE_TOKENS_PART, LEAKAGE_BYTES_PART],
    output:
        json=LEAKAGE_JSON,
    params:
        spec=config_spec("cache_dir", "leakage"),
        format_version=REPORT_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/leakage.log",
    benchmark:
        f"{CACHE}/benchmarks/report/leakage.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli leakage --parts {input.parts} --out {output.json}"
        " --spec {params.spec:q} > {log} 2>&1"


rule report_leakage:
    input:
        LEAKAGE_JSON,
    output:
        heatmap=report(FIGURE["leakage"], caption="report/leakage.rst", category="Leakage"),
        table=report(FIGURE["leakage_table"], caption="report/leakage_table.rst", category="Leakage"),
    params:
        spec=config_spec("cache_dir"),
        format_version=REPORT_FORMAT_VERSION,
    conda:
        "../environment.yml"
    log:
        f"{CACHE}/logs/report/leakage_figures.log",
    benchmark:
        f"{CACHE}/benchmarks/report/leakage_figures.tsv"
    shell:
        "{sys.executable} -m niels_gpt.cache.cli report-figures --family leakage --out-dir $(dirname {output.heatmap})"
        " --spec {params.spec:q} > {log} 2>&1"
