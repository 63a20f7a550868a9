"""normalize_text (NFC, control characters out except \\n and \\t) and that every loader applies it."""

from __future__ import annotations

import pytest
from loader_fixtures import write_parquet

from niels_gpt.data.normalize import normalize_text

RAW = "Cafe\u0301\r\n\ttab\x00\x07\x1b[0m\x7f\x85end"
CLEAN = "Caf\u00e9\n\ttab[0mend"


def test_nfc_and_control_characters():
    assert normalize_text(RAW) == CLEAN


@pytest.mark.parametrize("text", ["", "plain ascii", "  two  spaces\n\n\tindent", "ünïcødé ✓ 日本語", "<|ngpt_eot|>"])
def test_clean_text_is_unchanged(text):
    assert normalize_text(text) == text


def test_idempotent():
    assert normalize_text(normalize_text(RAW)) == normalize_text(RAW)


@pytest.mark.usefixtures("isolated_hf_cache")
def test_every_hub_loader_normalizes(tmp_path):
    from niels_gpt.data.dolly import iter_dolly_sft
    from niels_gpt.data.fineweb_edu import iter_fineweb_edu
    from niels_gpt.data.gutenberg import iter_gutenberg
    from niels_gpt.data.oasst1 import iter_oasst1_sft
    from niels_gpt.data.wikitext import iter_wikitext, iter_wikitext_articles

    text = str(write_parquet(tmp_path / "t.parquet", {"text": [RAW]}))
    assert next(iter_fineweb_edu(data_files={"train": text}, shuffle=False)).text == CLEAN
    assert next(iter_gutenberg(data_files={"train": text}, shuffle=False)).text == CLEAN
    assert next(iter_wikitext(data_files={"train": text})).text == CLEAN
    assert next(iter_wikitext_articles(data_files={"train": text})).text == CLEAN
    dolly = str(write_parquet(tmp_path / "d.parquet", {"instruction": [RAW], "context": [RAW], "response": [RAW]}))
    s = next(iter_dolly_sft(data_files={"train": dolly}, shuffle=False))
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
    s = next(iter_oasst1_sft(data_files={"train": oasst}))
    assert [m.content for m in s.messages] == [CLEAN, CLEAN]
