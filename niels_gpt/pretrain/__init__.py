"""The pretrain stage: documents -> uint16 token shards, and the reader of those shards (rules/pretrain.smk).

encode.py (documents in batches, encoded to uint16 by tokenizer worker processes), shards.py (rotating
shard files under temporary names), writer.py (`build_pretrain_cache`: split, budgets, meta.json),
record.py (what meta.json records), parts.py (one source as N part jobs, and their merge), job.py
(config -> loader -> writer), dataset.py (`PretrainTokenStreamDataset`: random windows from
memory-mapped shards), cli.py (`build-pretrain`, `merge-pretrain`).
"""
