"""The report stage (rules/report.smk): figures of the caches for `snakemake --report`, and the
train/val leakage audit.

corpora.py (the splits of the registry's caches, listed by the cache-tree walker inspection/tree.py),
ngrams.py (rolling n-gram hashes and the val-side index a train split is scanned against), leakage.py
(the audit and its gate), stats.py (the numbers behind the figures, from the caches and their
meta.json), plotting.py (what every figure shares: Agg, reproducible SVG, bars), figures.py
(pretrain, SFT, tokenizer and streams figures), leakage_view.py (the leakage heatmap and table),
job.py (config -> files), cli.py (`report-figures`, `leakage`).
"""
