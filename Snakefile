# niels_gpt data pipeline: raw text and chat corpora -> verified on-disk token caches.
#
#   snakemake -j4 cache/all                      every enabled cache (default target)
#   snakemake --config demo=true                 the same DAG on the bundled offline sample data, into cache-demo/
#   snakemake cache/sft/primer/meta.json         one artifact and what it needs
#   snakemake -n cache/all                       dry run: what would be (re)built, and why
#   snakemake --report cache/report.html         after cache/all: the HTML report of its figures (offline)
#
# Output tree ({cache} = config cache_dir; null: "cache", or "cache-demo" with demo=true):
#   {cache}/tokenizer/spm.model, meta.json                       rules/tokenizer.smk
#   {cache}/pretrain/{source}/{train,val}/shard_NNNNN.bin        rules/pretrain.smk
#   {cache}/pretrain/{source}/meta.json                            (lists its shards; written last)
#   {cache}/pretrain/{source}/parts/part_NNN/...                   pretrain.num_parts > 1: one cache per part,
#                                                                  and meta.json the manifest of their shards
#   {cache}/sft/{source}/{train,val}_tokens.bin, _idx.npy, meta.json     rules/sft.smk
#   {cache}/streams/{source}_{train,val}.bin, .meta.json          rules/streams.smk
#   {cache}/report/*.svg, leakage_table.html, leakage.json        rules/report.smk (figures, leakage audit:
#   {cache}/report/leakage_tokens.json, leakage_bytes.json          one part per space, joined into leakage.json)
#   {cache}/curation/raw/{pretrain,sft}/{source}/...              the builds' raw caches (rules/curation.smk
#   {cache}/curation/decisions/..., summary.json                   curates them into pretrain/ and sft/)
#   {cache}/report/certificate.json                               0 shared n-grams after curation
#   {cache}/.previous/                                           during a run: the outputs being rebuilt (rules/hooks.smk)
#   {cache}/all                                                   flag: everything above is built
#   {cache}/logs/..., {cache}/benchmarks/...                      one log / timing per job

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "rules/report/workflow.rst"


include: "rules/common.smk"
include: "rules/tokenizer.smk"
include: "rules/pretrain.smk"
include: "rules/sft.smk"
include: "rules/streams.smk"
include: "rules/report.smk"
include: "rules/curation.smk"
include: "rules/hooks.smk"


# Every declared output of every family (not just the meta.json files), and the report.
ALL_FLAG = f"{CACHE}/{layout.ALL_FLAG}"
ALL_TARGETS = [TOKENIZER_MODEL, TOKENIZER_META] + PRETRAIN_TARGETS + SFT_TARGETS + STREAM_TARGETS
ALL_TARGETS += list(FIGURE.values()) + [LEAKAGE_JSON, CURATION_SUMMARY, CERTIFICATE, CURATION_TABLE]

# Snakemake does not look behind an existing flag for artifacts deleted by hand or by a failed
# rebuild; drop the flag whenever one is missing so the next run rebuilds what is gone.
if os.path.exists(ALL_FLAG) and not all(os.path.exists(t) for t in ALL_TARGETS):
    os.remove(ALL_FLAG)


localrules:
    all,


rule all:
    default_target: True
    input:
        ALL_TARGETS,
    output:
        touch(ALL_FLAG),
