"""The SFT stage: chats -> rendered token ids + offsets, and the reader of those caches (rules/sft.smk).

writer.py (`build_sft_cache`: render, split, drop, write), windows.py (which tokens of an example a
row keeps: the one definition of truncation), job.py (config -> loader -> writer), dataset.py
(`SFTExampleDataset`: (x, y, y_masked) rows from memory-mapped examples, padded or packed), packing.py
(best-fit decreasing of whole examples into rows, and the slot layout of packed rows), cli.py
(`build-sft`, `build-sft-primer`).
"""
