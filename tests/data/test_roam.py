"""Roam notes: listing, the split by file (deterministic, disjoint), reading, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from niels_gpt.data.roam import iter_roam, list_roam_paths, load_texts, split_roam_paths


def _notes(root, n=20):
    for i in range(n):
        p = root / ("sub" if i % 3 == 0 else "") / f"n{i:02d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"note {i}\n\ttabbed\n", encoding="utf-8")
    (root / ".trash").mkdir()
    (root / ".trash" / "old.md").write_text("gone", encoding="utf-8")
    (root / "readme.txt").write_text("not a note", encoding="utf-8")
    return root


def test_lists_markdown_recursively_sorted_skipping_hidden(tmp_path):
    paths = list_roam_paths(_notes(tmp_path))
    rel = [p[len(str(tmp_path)) + 1 :] for p in paths]
    assert len(rel) == 20 and rel == sorted(rel)
    assert "sub/n00.md" in rel and not any(".trash" in r or r.endswith(".txt") for r in rel)


def test_split_is_deterministic_disjoint_and_complete(tmp_path):
    paths = list_roam_paths(_notes(tmp_path))
    train, val = split_roam_paths(paths, 0.1, 42)
    assert (train, val) == split_roam_paths(list(reversed(paths)), 0.1, 42)  # input order does not matter
    assert len(val) == 2 and not set(train) & set(val) and sorted(train + val) == sorted(paths)
    assert split_roam_paths(paths, 0.1, 7) != (train, val)


def test_texts_are_read_and_normalized(tmp_path):
    p = tmp_path / "a.md"
    p.write_bytes("x\r\nCafe\u0301\x0c".encode())
    assert load_texts([str(p)]) == ["x\nCaf\u00e9"]
    [sample] = iter_roam([str(p)], root=tmp_path)
    assert sample.source == "roam" and sample.meta == {"path": "a.md"} and sample.text == "x\nCaf\u00e9"


def test_missing_or_empty_folder_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere: roam notes folder not found.*sources\.roam\.root"):
        list_roam_paths(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"no \*\.md notes"):
        list_roam_paths(tmp_path)


def test_non_utf8_note_names_the_file(tmp_path):
    p = tmp_path / "bad.md"
    p.write_bytes(b"ok \xff")
    with pytest.raises(ValueError, match=r"bad\.md: not UTF-8 at byte 3"):
        load_texts([str(p)])


def test_pages_as_exports_write_them_are_listed_and_read_clean(tmp_path):
    names = [
        " leading space.md",
        "Re\u0301sume\u0301.md",
        "Q&A, (draft) #2 - 50%!.md",
        "{x} [y] $z.md",
        "two\nlines.md",
    ]
    names += ["Projects/Harbour/Budget.md"]
    for i, name in enumerate(names):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(("\ufeff" if i % 2 else "").encode() + f"- block {i}\r\n\t- child ((abcDEF123))\r\n".encode())
    (tmp_path / "Empty.md").write_bytes(b"\xef\xbb\xbf\r\n  \r\n")
    paths = list_roam_paths(tmp_path)
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in paths) == sorted(names + ["Empty.md"])
    texts = dict(zip(paths, load_texts(paths)))
    assert texts[str(tmp_path / "Empty.md")] == "\n  \n"  # blank: the writers skip it
    for name in names:
        text = texts[str(tmp_path / name)]
        assert text.startswith("- block ") and "\r" not in text and "\ufeff" not in text
    samples = list(iter_roam(paths, root=tmp_path))
    assert {s.meta["path"] for s in samples} == set(names) | {"Empty.md"}
