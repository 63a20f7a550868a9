"""What a training script uses at training time beyond one dataset: the mixed, resumable loader.

loader.py (`MixedLoader`: a deterministic mixture over several caches, exact resume, rank sharding;
public as `niels_gpt.cache.loader`).
"""
