"""SentencePieceTokenizer: encode/decode with the four chat special tokens as control symbols.

Layout of the id space (fixed by `niels_gpt.tokenizer.train.train_sentencepiece`):
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
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from niels_gpt.special_tokens import SPECIAL_TOKENS
from niels_gpt.token_files import check_vocab_fits


def _special_id(name: str) -> property:
    """A read-only attribute: the id of special token `name` (`tokenizer.eot_id` == `tokenizer.special_ids["eot"]`)."""
    return property(lambda self: self.special_ids[name], doc=f"The id of the {name} special token.")


class SentencePieceTokenizer:
    """Encode/decode with special ids by name; the only tokenizer every later stage uses."""

    def __init__(self, model_path: str | os.PathLike):
        self.model_path = str(model_path)
        try:
            data = Path(model_path).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{model_path}: tokenizer model not found; build it with "
                "`snakemake -j4 cache/tokenizer/spm.model` (add `--config demo=true` offline)"
            ) from None
        self._load(data)

    def _load(self, data: bytes) -> None:
        import sentencepiece as spm

        self.sha256 = hashlib.sha256(data).hexdigest()
        self._sp = spm.SentencePieceProcessor(model_proto=data)
        self.vocab_size = self._sp.get_piece_size()
        check_vocab_fits(self.vocab_size, what=self.model_path)
        self.special_ids: dict[str, int] = {}
        for name, piece in SPECIAL_TOKENS.items():
            pid = self._sp.piece_to_id(piece)
            if self._sp.id_to_piece(pid) != piece or not self._sp.is_control(pid):
                raise ValueError(
                    f"{self.model_path}: special token {name} ({piece}) is not a control symbol of this "
                    "model; train it with niels_gpt (tokenizer.model_path must point to such a model)"
                )
            self.special_ids[name] = pid

    def __getstate__(self) -> dict:
        """Pickled with its model bytes (worker processes encode with exactly this model, whatever
        happens to the file meanwhile)."""
        return {"model_path": self.model_path, "model_proto": self._sp.serialized_model_proto()}

    def __setstate__(self, state: dict) -> None:
        self.model_path = state["model_path"]
        self._load(state["model_proto"])

    sys_id = _special_id("sys")
    usr_id = _special_id("usr")
    asst_id = _special_id("asst")
    eot_id = _special_id("eot")

    def encode(self, text: str) -> list[int]:
        """Ordinary pieces only: special strings inside `text` are encoded as plain text."""
        return self._sp.encode(text)

    def encode_batch(self, texts: list[str], *, num_threads: int = -1) -> list[list[int]]:
        """Encode many texts in C++ threads (order preserved); -1 uses every core."""
        return self._sp.encode(texts, num_threads=num_threads)

    def encode_batch_arrays(self, texts: list[str], *, num_threads: int = -1) -> list[np.ndarray]:
        """`encode_batch` with each text's ids as an int32 array. A sentencepiece with numpy output
        hands them over as buffers, no Python int per id (the cheaper way to uint16 files); an older
        one goes through the id lists."""
        if hasattr(self._sp, "EncodeAsNumpy"):
            return self._sp.encode(texts, out_type="numpy", num_threads=num_threads)
        lists = self._sp.encode(texts, num_threads=num_threads)
        return [np.array(ids, dtype=np.int32) for ids in lists]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ordinary pieces; special ids decode to nothing (see `decode_with_specials`)."""
        return self._sp.decode(list(ids))

    def decode_with_specials(self, ids: Iterable[int], *, short_names: bool = False) -> str:
        """Like `decode`, but special ids appear as their literal strings, or as `<|sys|>`, `<|usr|>`,
        `<|asst|>`, `<|eot|>` with `short_names` (what `inspect` shows)."""
        by_id = {v: f"<|{k}|>" if short_names else SPECIAL_TOKENS[k] for k, v in self.special_ids.items()}
        out, run = [], []
        for i in (int(t) for t in ids):
            if i in by_id:
                out += [self._sp.decode(run), by_id[i]]
                run = []
            else:
                run.append(i)
        out.append(self._sp.decode(run))
        return "".join(out)

    def piece_bytes(self) -> list[int]:
        """UTF-8 bytes each id adds to a decoded text: a learned piece its text's length (the space
        symbol is one byte), a byte-fallback piece 1, unk and the special ids 0. For ordinary ids,
        `sum(piece_bytes()[i] for i in ids) == len(decode(ids).encode())`: bytes per token from ids alone."""
        sp = self._sp

        def n_bytes(i: int) -> int:
            if sp.is_control(i) or sp.is_unknown(i):
                return 0
            return 1 if sp.is_byte(i) else len(sp.id_to_piece(i).replace("\u2581", " ").encode())

        return [n_bytes(i) for i in range(self.vocab_size)]

    def id_to_piece(self, i: int) -> str:
        return self._sp.id_to_piece(i)

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer({self.model_path!r}, vocab_size={self.vocab_size}, sha256={self.sha256[:12]})"
