"""Light normalization, applied by every loader to every text, and the one definition of a blank document.

`normalize_text(text)`, in this order:
1. line ends: CRLF and a lone CR become LF;
2. removed: control characters (Unicode category Cc) other than tab and newline, and four invisible
   format characters that carry no content in running text:
     U+FEFF  ZERO WIDTH NO-BREAK SPACE / byte-order mark (wherever it occurs, not only at the start)
     U+200B  ZERO WIDTH SPACE
     U+2060  WORD JOINER
     U+00AD  SOFT HYPHEN (a hyphenation hint; the word reads the same without it)
3. Unicode NFC (after the removals, so a removed character between a letter and its combining mark
   cannot leave a decomposed pair behind).
Kept on purpose, although invisible (category Cf): U+200C ZERO WIDTH NON-JOINER and U+200D ZERO WIDTH
JOINER (they change how Persian, Indic and emoji sequences are written), the bidirectional marks and
controls (U+200E, U+200F, U+061C, U+202A-U+202E, U+2066-U+2069: right-to-left text reads wrong
without them) and emoji tag characters (U+E0020-U+E007F, subdivision flags).

`is_blank(text)`: empty or whitespace-only, the one definition of a blank document. The pretrain
writers (through encode.py) and the byte streams skip such documents and count them; wikitext's empty
rows and the primer's empty dialogue blocks are told apart with it too.
"""

from __future__ import annotations

import re
import unicodedata

# Removed: C0 and C1 controls and DEL except \t (0x09) and \n (0x0a), and the four format characters above
_REMOVED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b\u2060\ufeff]")


def normalize_text(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _REMOVED.sub("", text)
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text


def is_blank(text: str) -> bool:
    """True for an empty or whitespace-only text (str.isspace: spaces, tabs, newlines, NBSP, ...)."""
    return not text or text.isspace()
