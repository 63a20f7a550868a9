"""SentencePiece tokenizer with the four chat special tokens as control symbols.

Layout of the id space (fixed by `train_sentencepiece`):
  0            <unk>
  1..4         sys, usr, asst, eot  (control symbols: never produced from text)
  5, 6         "\n", "\t"           (user-defined: whitespace is kept exactly)
  7..262       <0x00>..<0xFF>       (byte fallback: any character round-trips)
  263..        learned pieces
No bos/eos/pad pieces: chat structure is explicit special ids, documents end with eot.

Normalization is the identity and no dummy prefix is added, so `decode(encode(text)) == text`
for every text (runs of spaces, tabs, newlines and unseen characters included).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from niels_gpt.atomic import atomic_write_bytes
from niels_gpt.cache.formats import check_vocab_fits
from niels_gpt.special_tokens import SPECIAL_TOKENS

WHITESPACE_SYMBOLS = ["\n", "\t"]
# pieces that are not learned: <unk> + specials + whitespace symbols + 256 byte-fallback pieces
RESERVED_PIECES = 1 + len(SPECIAL_TOKENS) + len(WHITESPACE_SYMBOLS) + 256
MAX_SENTENCE_CHARS = 4096  # sentencepiece skips longer training sentences, so lines are chunked


class SentencePieceTokenizer:
    """Encode/decode with special ids by name; the only tokenizer every later stage uses."""

    def __init__(self, model_path: str | os.PathLike):
        import sentencepiece as spm

        self.model_path = str(model_path)
        try:
            data = Path(model_path).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{model_path}: tokenizer model not found; build it with "
                "`snakemake -j4 cache/tokenizer/spm.model` (add `--config demo=true` offline)"
            ) from None
        self.sha256 = hashlib.sha256(data).hexdigest()
        self._sp = spm.SentencePieceProcessor(model_proto=data)
        self.vocab_size = self._sp.get_piece_size()
        check_vocab_fits(self.vocab_size, what=self.model_path)
        self.special_ids: dict[str, int] = {}
        for name, piece in SPECIAL_TOKENS.items():
            pid = self._sp.piece_to_id(piece)
            if self._sp.id_to_piece(pid) != piece or not self._sp.is_control(pid):
                raise ValueError(
                    f"{model_path}: special token {name} ({piece}) is not a control symbol of this "
                    "model; train it with niels_gpt (tokenizer.model_path must point to such a model)"
                )
            self.special_ids[name] = pid

    @property
    def sys_id(self) -> int:
        return self.special_ids["sys"]

    @property
    def usr_id(self) -> int:
        return self.special_ids["usr"]

    @property
    def asst_id(self) -> int:
        return self.special_ids["asst"]

    @property
    def eot_id(self) -> int:
        return self.special_ids["eot"]

    def encode(self, text: str) -> list[int]:
        """Ordinary pieces only: special strings inside `text` are encoded as plain text."""
        return self._sp.encode(text)

    def encode_batch(self, texts: list[str], *, num_threads: int = -1) -> list[list[int]]:
        """Encode many texts in C++ threads (order preserved); -1 uses every core."""
        return self._sp.encode(texts, num_threads=num_threads)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ordinary pieces; special ids decode to nothing (see `decode_with_specials`)."""
        return self._sp.decode(list(ids))

    def decode_with_specials(self, ids: Iterable[int]) -> str:
        """Like `decode`, but special ids appear as their literal strings (for inspection)."""
        by_id = {v: SPECIAL_TOKENS[k] for k, v in self.special_ids.items()}
        out, run = [], []
        for i in ids:
            if i in by_id:
                out.append(self._sp.decode(run))
                out.append(by_id[i])
                run = []
            else:
                run.append(int(i))
        out.append(self._sp.decode(run))
        return "".join(out)

    def id_to_piece(self, i: int) -> str:
        return self._sp.id_to_piece(i)

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer({self.model_path!r}, vocab_size={self.vocab_size}, sha256={self.sha256[:12]})"


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
