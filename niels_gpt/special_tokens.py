"""The four chat special tokens, by name.

The literal strings carry a random suffix so no real text contains them by accident; `<|sys|>`,
`<|usr|>`, `<|asst|>`, `<|eot|>` are their short names (what `inspect` shows). They are SentencePiece
*control symbols*: they have ids, but no text ever encodes to them, so a message that contains the
literal string cannot inject a control token.
"""

SPECIAL_SUFFIX = "84a5023f67d74cf29cc4001becde983c"

# name -> literal string; the order is the order of their ids in the tokenizer
SPECIAL_TOKENS: dict[str, str] = {
    "sys": f"<|ngpt_sys_{SPECIAL_SUFFIX}|>",
    "usr": f"<|ngpt_usr_{SPECIAL_SUFFIX}|>",
    "asst": f"<|ngpt_asst_{SPECIAL_SUFFIX}|>",
    "eot": f"<|ngpt_eot_{SPECIAL_SUFFIX}|>",
}

# chat role -> special token name (fixed: caches and trained models depend on it)
ROLE_TO_SPECIAL: dict[str, str] = {"system": "sys", "user": "usr", "assistant": "asst"}
