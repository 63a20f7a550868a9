"""Light normalization, the only cleaning the pipeline does.

Unicode NFC, and removal of control characters (Unicode category Cc) other than newline and tab.
Every loader passes its text through `normalize_text`.
"""

from __future__ import annotations

import re
import unicodedata

# C0 and C1 controls and DEL, except \t (0x09) and \n (0x0a); \r is dropped so CRLF becomes LF
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def normalize_text(text: str) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return _CONTROL_CHARS.sub("", text)
