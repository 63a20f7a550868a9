"""wikitext: non-empty lines, load_wikitext's train/val/test, and articles split at ` = Title = `."""

from __future__ import annotations

import pytest

from niels_gpt.data.wikitext import is_article_heading, iter_wikitext, iter_wikitext_articles, load_wikitext
from tests.support.hub_files import WIKI_TEST, WIKI_TRAIN, WIKI_VAL, write_parquet

pytestmark = pytest.mark.usefixtures("isolated_hf_cache")


@pytest.fixture
def files(tmp_path):
    return {
        s: str(write_parquet(tmp_path / f"{s}.parquet", {"text": rows}))
        for s, rows in (("train", WIKI_TRAIN), ("validation", WIKI_VAL), ("test", WIKI_TEST))
    }


def test_lines_drop_empty_rows_and_the_trailing_newline(files):
    lines = [s.text for s in iter_wikitext(data_files=files)]
    assert lines == [
        " = Alpha River = ",
        " The Alpha River runs north . ",
        " = = Course = = ",
        " It passes a stone bridge . ",
        " = Beta Stone = ",
        " Beta is a stone . ",
    ]
    assert [s.text for s in iter_wikitext(data_files=files, take=2)] == lines[:2]


def test_load_wikitext_maps_validation_to_val(files):
    out = load_wikitext(data_files=files)
    assert list(out) == ["train", "val", "test"]
    assert out["val"] == [" = Gamma Light = ", " Gamma shines . "]  # the whitespace-only row is gone
    assert len(out["train"]) == 6 and len(out["test"]) == 2


def test_articles_start_at_top_level_headings(files):
    arts = list(iter_wikitext_articles(data_files=files))
    assert [a.meta["title"] for a in arts] == ["Alpha River", "Beta Stone"]
    assert (
        arts[0].text
        == " = Alpha River = \n The Alpha River runs north . \n = = Course = = \n It passes a stone bridge . "
    )
    assert arts[1].text == " = Beta Stone = \n Beta is a stone . "
    assert [a.text for a in iter_wikitext_articles(data_files=files, take=1)] == [arts[0].text]


@pytest.mark.parametrize(
    "line,expected",
    [
        (" = Valkyria Chronicles III = ", True),
        ("= A =", True),
        (" = = Gameplay = = ", False),
        (" = = = Deep = = = ", False),
        (" 2 = 2 ", False),
        (" = ", False),
        ("a = b =", False),
    ],
)
def test_heading_rule(line, expected):
    assert is_article_heading(line) is expected
