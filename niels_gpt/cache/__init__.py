"""The public face of the token caches: what training scripts import and what users run.

    from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
    from niels_gpt.cache.sft_dataset import SFTExampleDataset
    from niels_gpt.cache.loader import MixedLoader
    from niels_gpt.cache.build_cache import build_pretrain_cache, build_sft_cache
    from niels_gpt.cache.meta import read_meta            (the meta.json contract)
    from niels_gpt.cache.formats import TOKEN_DTYPE      (the uint16 / int64 file formats)
    from niels_gpt.cache.mmap import open_tokens          (a token file, memory-mapped)
    python -m niels_gpt.cache.cli --help                  (cli.py; build_all.py: `build-all`)

Every module here re-exports from where the code lives (niels_gpt.meta, niels_gpt.token_files and the
stage packages niels_gpt.pretrain, niels_gpt.sft, niels_gpt.training), or is a command; nothing below
this package imports from it.
"""
