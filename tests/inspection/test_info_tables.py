"""The tables `info` prints (info_tables.py): units, cuts and drops by reason, cleaning."""

from __future__ import annotations

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
