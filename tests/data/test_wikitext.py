"""wikitext: non-empty lines, load_wikitext's train/val/test, and articles split at ` = Title = `."""

from __future__ import annotations

import pytest

from niels_gpt.data.hub import HubRead
from niels_gpt.data.wikitext import (
    DATASET_ID,
    is_article_heading,
    iter_wikitext,
    load_wikitext,
    wikitext_articles,
)


def local(data_files, **kw) -> HubRead:
    """A read of local files in the hub's wikitext schema."""
    return HubRead(DATASET_ID, data_files=data_files, **kw)


def test_lines_drop_empty_rows_and_the_trailing_newline(wiki_files):
    lines = [s.text for s in iter_wikitext(read=local(wiki_files))]
    assert lines == [
        " = Alpha River = ",
        " The Alpha River runs north . ",
        " = = Course = = ",
        " It passes a stone bridge . ",
        " = Beta Stone = ",
        " Beta is a stone . ",
    ]
    assert [s.text for s in iter_wikitext(read=local(wiki_files, take=2))] == lines[:2]


def test_load_wikitext_maps_validation_to_val(wiki_files):
    out = load_wikitext(read=local(wiki_files))
    assert list(out) == ["train", "val", "test"]
    assert out["val"] == [" = Gamma Light = ", " Gamma shines . "]  # the whitespace-only row is gone
    assert len(out["train"]) == 6 and len(out["test"]) == 2


def test_articles_start_at_top_level_headings(wiki_files):
    arts = list(wikitext_articles(iter_wikitext(read=local(wiki_files))))
    assert [a.meta["title"] for a in arts] == ["Alpha River", "Beta Stone"]
    assert (
        arts[0].text
        == " = Alpha River = \n The Alpha River runs north . \n = = Course = = \n It passes a stone bridge . "
    )
    assert arts[1].text == " = Beta Stone = \n Beta is a stone . "
    assert [a.text for a in wikitext_articles(iter_wikitext(read=local(wiki_files)), take=1)] == [arts[0].text]


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


def test_articles_take_zero_and_lines_before_the_first_heading():
    from niels_gpt.data.types import PretrainSample

    lines = [PretrainSample(t, "wikitext", {"index": i}) for i, t in enumerate(["intro", " = A = ", "a"])]
    arts = list(wikitext_articles(lines))
    assert [(a.text, a.meta) for a in arts] == [
        ("intro", {"article": 0, "title": None, "first_row": 0}),
        (" = A = \na", {"article": 1, "title": "A", "first_row": 1}),
    ]
    assert list(wikitext_articles(lines, take=0)) == []


def test_a_single_file_or_a_list_of_files_is_the_train_split(wiki_files):
    """data_files as `datasets` takes it: a path (or list of paths) is the "train" split, not a mapping."""
    one = load_wikitext(read=local(wiki_files["train"]))
    assert (len(one["train"]), one["val"], one["test"]) == (6, [], [])
    both = load_wikitext(read=local([wiki_files["train"], wiki_files["validation"]]))
    assert both["train"] == one["train"] + [" = Gamma Light = ", " Gamma shines . "] and both["val"] == []
    assert [s.text for s in iter_wikitext(read=local(wiki_files["test"]))] == [" = Delta = ", " Delta waits . "]


def test_read_replaces_the_keywords_and_is_never_shuffled(wiki_files):
    read = HubRead(DATASET_ID, data_files=wiki_files, split="validation", take=1)
    assert [s.text for s in iter_wikitext(read=read, split="train", take=5)] == [" = Gamma Light = "]
    with pytest.raises(ValueError, match="row order"):
        next(iter_wikitext(read=HubRead(DATASET_ID, data_files=wiki_files, shuffle=True)))
