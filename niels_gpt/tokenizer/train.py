"""Train the SentencePiece model: the id layout of `model.py`, lossless on any text.

`train_sentencepiece(texts, out_path, vocab_size=...)` trains unigram (or bpe) on `texts` with the four
chat specials as control symbols, `\n` and `\t` as pieces, byte fallback, identity normalization and
no dummy prefix, then writes the model atomically. Lines are the trainer's sentences (newlines are a
fixed piece); lines longer than MAX_SENTENCE_CHARS are chunked, since the trainer skips longer ones.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator

from niels_gpt.atomic import atomic_write_bytes
from niels_gpt.special_tokens import SPECIAL_TOKENS
from niels_gpt.token_files import check_vocab_fits
from niels_gpt.tokenizer.model import SentencePieceTokenizer

WHITESPACE_SYMBOLS = ["\n", "\t"]
# pieces that are not learned: <unk> + specials + whitespace symbols + 256 byte-fallback pieces
RESERVED_PIECES = 1 + len(SPECIAL_TOKENS) + len(WHITESPACE_SYMBOLS) + 256
MAX_SENTENCE_CHARS = 4096  # sentencepiece skips longer training sentences, so lines are chunked


def training_sentences(texts: Iterable[str]) -> Iterator[str]:
    """Non-empty lines of each text, chunked to MAX_SENTENCE_CHARS (newlines are a fixed symbol)."""
    for text in texts:
        for line in text.split("\n"):
            for i in range(0, len(line), MAX_SENTENCE_CHARS):
                chunk = line[i : i + MAX_SENTENCE_CHARS]
                if chunk.strip():
                    yield chunk


def train_sentencepiece(
    texts: Iterable[str],
    out_path: str | os.PathLike,
    *,
    vocab_size: int = 16_000,
    model_type: str = "unigram",
    character_coverage: float = 0.9995,
    num_threads: int = 2,
) -> SentencePieceTokenizer:
    """Train on `texts` and write the model atomically to `out_path`.

    `vocab_size` counts ordinary pieces; the model has `vocab_size + 4` ids (the specials).
    The uint16 check runs before training and again on the trained model, before any write.
    Deterministic for the same texts in the same order.
    """
    import sentencepiece as spm

    total = vocab_size + len(SPECIAL_TOKENS)
    check_vocab_fits(total, what="tokenizer.vocab_size")
    if vocab_size <= RESERVED_PIECES:
        raise ValueError(
            f"tokenizer.vocab_size={vocab_size} leaves no room for learned pieces "
            f"({RESERVED_PIECES} ids are reserved for <unk>, whitespace symbols and byte fallback)"
        )
    model = io.BytesIO()
    try:
        _train(spm, texts, model, total, model_type, character_coverage, num_threads)
    except RuntimeError as e:
        m = re.search(r"value <= (\d+)", str(e))
        if not m:
            raise
        raise ValueError(
            f"tokenizer.vocab_size={vocab_size:,} is more than the training sample supports "
            f"(at most {int(m.group(1)) - len(SPECIAL_TOKENS):,} ordinary pieces): lower "
            "tokenizer.vocab_size or give the tokenizer more text (tokenizer.sample_chars)"
        ) from None
    data = model.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=data)
    check_vocab_fits(sp.get_piece_size(), what="trained tokenizer")
    atomic_write_bytes(out_path, data)
    return SentencePieceTokenizer(out_path)


def _train(spm, texts, model, total, model_type, character_coverage, num_threads) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=training_sentences(texts),
        model_writer=model,
        vocab_size=total,
        model_type=model_type,
        character_coverage=character_coverage,
        byte_fallback=True,
        control_symbols=list(SPECIAL_TOKENS.values()),
        user_defined_symbols=WHITESPACE_SYMBOLS,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        allow_whitespace_only_pieces=True,
        split_digits=True,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        max_sentence_length=MAX_SENTENCE_CHARS * 4,  # bytes
        input_sentence_size=0,  # the caller already sampled; use every sentence, in order
        shuffle_input_sentence=False,
        num_threads=num_threads,
        minloglevel=2,
    )
