"""The public face of the token caches: what training scripts import and what users run.

    from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
    from niels_gpt.cache.sft_dataset import SFTExampleDataset
    from niels_gpt.cache.loader import MixedLoader
    from niels_gpt.cache.build_cache import build_pretrain_cache, build_sft_cache
    python -m niels_gpt.cache.cli --help

meta.py is the meta.json contract; the other modules re-export from the stage packages
(niels_gpt.pretrain, niels_gpt.sft, niels_gpt.training) where the code lives.
"""
