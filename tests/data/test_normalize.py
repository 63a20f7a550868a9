"""normalize_text (line ends, control and invisible format characters, NFC), is_blank, and that every
loader applies the normalization."""

from __future__ import annotations

import pytest

from niels_gpt.data.normalize import is_blank, normalize_text
from tests.support.hub_files import write_parquet

RAW = "\ufeffCafe\u0301\r\n\ttab\x00\x07\x1b[0m\x7f\x85end\ufeff"
CLEAN = "Caf\u00e9\n\ttab[0mend"


def test_nfc_and_control_characters():
    assert normalize_text(RAW) == CLEAN


@pytest.mark.parametrize("text", ["", "plain ascii", "  two  spaces\n\n\tindent", "ünïcødé ✓ 日本語", "<|ngpt_eot|>"])
def test_clean_text_is_unchanged(text):
    assert normalize_text(text) == text


def test_byte_order_marks_and_invisible_spaces_go_wherever_they_are():
    text = "\ufeffone\ufeff two\u200bthree co\u00adoperate word\u2060joiner\ufeff"
    assert normalize_text(text) == "one twothree cooperate wordjoiner"


def test_joiners_and_bidirectional_marks_are_kept():
    kept = [
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: ZWNJ inside a word
        "\u0915\u094d\u200d\u0937",  # Devanagari: ZWJ selects a half form
        "\U0001f469\u200d\U0001f4bb",  # emoji ZWJ sequence
        "abc \u200f\u05d0\u05d1 \u200e \u202bx\u202c \u2067y\u2069",  # RLM, LRM, embedding, isolate
        "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # tag sequence flag
    ]
    for text in kept:
        assert normalize_text(text) == text


def test_carriage_returns_become_newlines():
    assert normalize_text("a\r\nb\rc\n\rd") == "a\nb\nc\n\nd"


def test_nfc_is_applied_after_removal():
    # U+FEFF between a letter and its combining accent: removed first, then composed
    assert normalize_text("e\ufeff\u0301") == "\u00e9"


@pytest.mark.parametrize(
    ("text", "blank"),
    [("", True), ("  \n\t\n", True), ("\u00a0\u3000", True), ("\n.\n", False), ("\u200c", False)],
)
def test_is_blank(text, blank):
    assert is_blank(text) is blank


def test_idempotent():
    assert normalize_text(normalize_text(RAW)) == normalize_text(RAW)


def test_every_hub_loader_normalizes(tmp_path):
    from niels_gpt.data.dolly import iter_dolly_sft
    from niels_gpt.data.fineweb_edu import iter_fineweb_edu
    from niels_gpt.data.gutenberg import iter_gutenberg
    from niels_gpt.data.oasst1 import iter_oasst1_sft
    from niels_gpt.data.source import HubRead
    from niels_gpt.data.wikitext import iter_wikitext, wikitext_articles

    def local(files: str) -> HubRead:
        return HubRead("org/local", data_files={"train": files})

    text = str(write_parquet(tmp_path / "t.parquet", {"text": [RAW]}))
    assert next(iter_fineweb_edu(read=local(text))).text == CLEAN
    assert next(iter_gutenberg(read=local(text))).text == CLEAN
    assert next(iter_wikitext(read=local(text))).text == CLEAN
    assert next(wikitext_articles(iter_wikitext(read=local(text)))).text == CLEAN
    dolly = str(write_parquet(tmp_path / "d.parquet", {"instruction": [RAW], "context": [RAW], "response": [RAW]}))
    s = next(iter_dolly_sft(read=local(dolly)))
    assert [m.content for m in s.messages] == [CLEAN + "\n\ncontext:\n" + CLEAN, CLEAN]
    oasst = str(
        write_parquet(
            tmp_path / "o.parquet",
            {
                "message_id": ["r", "a"],
                "parent_id": [None, "r"],
                "message_tree_id": ["r", "r"],
                "role": ["prompter", "assistant"],
                "text": [RAW, RAW],
                "lang": ["en", "en"],
                "deleted": [False, False],
            },
        )
    )
    s = next(iter_oasst1_sft(read=local(oasst)))
    assert [m.content for m in s.messages] == [CLEAN, CLEAN]
