"""niels_gpt data pipeline: loaders, tokenizer, cache writers, memory-mapped datasets, batching.

Kept import-light on purpose (no torch, no datasets): the Snakefile and every CLI import
this package, and `snakemake -n` should not pay for heavy imports.
"""

__version__ = "0.1.0"
