"""The tables `info` prints (info_tables.py): units, cuts and drops by reason, cleaning."""

from __future__ import annotations

from niels_gpt.inspection.info import SplitInfo
from niels_gpt.inspection.info_tables import format_info, human_bytes
from tests.support.cache_tree import meta_of
from tests.support.cli import cache_cli, row, section


def test_info_shows_cuts_drops_and_cleaning(tree, capsys):
    rc, out, _ = cache_cli(capsys, "info", tree)
    stats = meta_of(tree / "sft/y")["splits"]
    for split in ("train", "val"):
        cells = row(section(out, "sft"), "sft/y", split)
        cut, dropped = stats[split]["cut"]["end"], stats[split]["dropped"]["no_target_in_window"]
        detail = f" (no_target_in_window {dropped})" if dropped else ""
        assert cells[-2:] == [f"{cut} (end {cut}); T_max 64, head", f"{dropped}{detail}"]
    assert stats["train"]["cut"]["end"] > 0 and stats["train"]["num_dropped"] + stats["val"]["num_dropped"] == 4
    cleaning = section(out, "cleaning (from meta.json)")
    assert row(cleaning, "pretrain/x") == ["pretrain/x", "2", "2 books, 345 chars", "-"]
    assert row(cleaning, "streams/wiki_train")[1:] == ["0", "-", "-"]
    assert row(cleaning, "sft/y")[1:] == ["-", "-", "-"]


def test_units_are_the_family_words():
    rows = [
        SplitInfo("tokenizer", "tokenizer", "-", units=404),
        SplitInfo("pretrain/x", "pretrain", "train", tokens=10, units=3),
        SplitInfo("sft/y", "sft", "val", tokens=10, units=1),
        SplitInfo("streams/wiki_val", "streams", "val", units=5),
        SplitInfo("pretrain/off", "pretrain", "-", built="no"),
    ]
    out = format_info(rows, None, None)
    units = [row(out, r.artifact)[4] for r in rows]
    assert units == ["404 pieces", "3 documents", "1 examples", "5 segments", "-"]
    assert row(out, "artifact")[4] == "units"


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 999, 1000, 1_234_567, 9 * 10**12)] == [
        "0 B",
        "999 B",
        "1.0 KB",
        "1.2 MB",
        "9,000.0 GB",
    ]
