"""Normalized words of token ids, hashed without decoding: the unit of the exact and near-duplicate keys.

A word is a run of tokens that starts at a piece beginning with whitespace (the tokenizer's "▁", "\\n",
"\\t"), a special id, or a document start (the tokenizer never joins two whitespace-separated words in
one piece). Normalization keeps the letters and digits of a word, lowercased (`str.isalnum`,
`str.lower`); a word with none (punctuation, whitespace) is dropped. So "The cat," and "the  cat"
give the same words. `normalized_words(text)` is the same rule on text (tests, benchmarks, the reference).

A word's hash is the polynomial hash of its normalized characters (c = ord(ch) + 1)

    H(c_1 .. c_m) = c_1*B^(m-1) + ... + c_m   (mod 2**64),

so it does not depend on how the tokenizer cut the word ("▁Hel" + "lo" and "▁hello" agree). It is
computed for a whole chunk of ids at once from per-piece tables g = H(piece) and len(piece): a word's H is
the sum over its pieces of g(piece) * B^(characters after the piece in the word), one term per token, and
the sums of all words are differences of one running sum over the chunk (mod 2**64, where the sum wraps),
with B^k looked up in a table up to the longest word. About ten whole-array passes per token; Horner's
rule h = h * B^len + g, one step per token position over words sorted by length, took 1.25x as long
(the sort and the gathers); a prefix-sum formulation with B's inverse needs two cumulative products.
The result goes through splitmix64's finalizer so that every bit depends on every character.
Deterministic: no Python `hash()` (salted per process) anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MASK64 = (1 << 64) - 1
BASE = 0x100000001B3  # odd (invertible mod 2**64): the FNV-64 prime; any odd constant with spread bits works
SPACE_MARK = "\u2581"  # sentencepiece's whitespace symbol
WHITESPACE_PIECES = ("\n", "\t")


def mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 values (a bijection; flips about half the bits per input bit)."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def normalize(text: str) -> str:
    """The letters and digits of `text`, lowercased."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def normalized_words(text: str) -> list[str]:
    """The words of `text` as curation sees them: whitespace-separated, normalized, empty ones dropped."""
    return [w for w in (normalize(w) for w in text.split()) if w]


def string_hash(s: str) -> int:
    """H(s) of the module docstring, as a Python int (mod 2**64)."""
    h = 0
    for ch in s:
        h = (h * BASE + ord(ch) + 1) & MASK64
    return h


def word_hash_of(word: str) -> int:
    """The finalized hash of one normalized word (what `WordTable.word_hashes` gives for it)."""
    return int(mix64(np.array([string_hash(word)], dtype=np.uint64))[0])


def _powers(k: int) -> np.ndarray:
    """B^0 .. B^k (mod 2**64), uint64."""
    out = np.full(k + 1, BASE, dtype=np.uint64)
    out[0] = 1
    return np.cumprod(out, out=out)


@dataclass(frozen=True)
class WordTable:
    """Per-id tables of a tokenizer: does the id start a word, and its normalized piece's H and length."""

    starts: np.ndarray  # bool
    g: np.ndarray  # uint64 H(normalized piece)
    length: np.ndarray  # int64 normalized characters

    @classmethod
    def from_pieces(cls, pieces: list[str], special: set[int] = frozenset()) -> WordTable:
        """`pieces[i]`: the text of id i as sentencepiece spells it ("▁the", "<0xE2>" for byte fallback)."""
        n = len(pieces)
        starts = np.zeros(n, dtype=bool)
        g = np.zeros(n, dtype=np.uint64)
        length = np.zeros(n, dtype=np.int64)
        for i, piece in enumerate(pieces):
            if i in special:
                starts[i] = True
                continue
            if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:  # byte fallback
                byte = int(piece[3:5], 16)
                # an ASCII byte is its character; a byte of a longer UTF-8 character is kept as itself
                text = normalize(chr(byte)) if byte < 0x80 else chr(0xF0000 + byte)
                starts[i] = chr(byte).isspace() if byte < 0x80 else False
            else:
                starts[i] = piece.startswith((SPACE_MARK, *WHITESPACE_PIECES))
                text = normalize(piece.replace(SPACE_MARK, " "))
            g[i] = string_hash(text)
            length[i] = len(text)
        return cls(starts, g, length)

    @classmethod
    def from_tokenizer(cls, tokenizer) -> WordTable:
        """The table of a `SentencePieceTokenizer` (control and unknown ids end words and hold no text)."""
        sp = tokenizer._sp
        pieces = [sp.id_to_piece(i) for i in range(tokenizer.vocab_size)]
        special = {i for i in range(tokenizer.vocab_size) if sp.is_control(i) or sp.is_unknown(i)}
        return cls.from_pieces(pieces, special)

    def word_hashes(self, ids: np.ndarray, doc_starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(hash of every non-empty word of `ids`, the position in `ids` of each word's first token), in
        order. `doc_starts`: positions where a document begins (a word never crosses one)."""
        ids = np.asarray(ids)
        if not len(ids):
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        starts = self.starts[ids]
        starts[np.asarray(doc_starts, dtype=np.int64)] = True
        starts[0] = True
        first = np.flatnonzero(starts)
        end = np.append(first[1:], len(ids))
        chars = np.zeros(len(ids) + 1, dtype=np.int64)  # characters before each position
        np.cumsum(self.length[ids], out=chars[1:])
        # H of a word = sum over its pieces of g(piece) * B^(characters after the piece in the word): a sum of
        # one term per token, taken for every word at once as differences of one running sum (mod 2**64).
        word_chars = np.zeros(len(ids), dtype=np.int64)  # per position: characters up to its word's end
        word_chars[first] = np.diff(chars[end], prepend=0)  # (a running sum of steps: np.repeat is 5x slower)
        after = np.cumsum(word_chars, out=word_chars) - chars[1:]
        terms = self.g[ids] * _powers(int(after.max()))[after]
        total = np.zeros(len(ids) + 1, dtype=np.uint64)
        np.cumsum(terms, out=total[1:])
        keep = chars[end] > chars[first]
        return mix64(total[end[keep]] - total[first[keep]]), first[keep]
