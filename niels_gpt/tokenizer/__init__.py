"""The tokenizer stage: the SentencePiece model every cache is built with (rules/tokenizer.smk).

    from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece

model.py (load, encode, decode, special ids), train.py (train a model), workers.py (encoding in worker
processes, for the pretrain and SFT writers), job.py (config -> model + meta.json), cli.py
(`build-tokenizer`).
"""

from niels_gpt.tokenizer.model import SentencePieceTokenizer
from niels_gpt.tokenizer.train import train_sentencepiece

__all__ = ["SentencePieceTokenizer", "train_sentencepiece"]
