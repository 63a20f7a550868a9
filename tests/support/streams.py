"""Inputs for the byte-stream tests: wiki lines, a folder of roam notes and a primer file, and tiny
in-memory byte sources for the batcher."""

from __future__ import annotations

from pathlib import Path

from niels_gpt.streams import StreamBuildConfig

DELIM = "\n\n<dialogue>\n\n"
WIKI = {
    "train": [" = Alpha = ", " The river runs north past the old mill ."] * 20,
    "val": [" = Beta = ", " A stone bridge crosses it ."] * 10,
    "test": ["unused"],
}


def write_stream_inputs(tmp_path: Path) -> StreamBuildConfig:
    """Ten roam notes and a primer with ten dialogues under `tmp_path`; the StreamBuildConfig reading
    them (streams in tmp_path/cache, seed 42, T 16)."""
    root = tmp_path / "roam"
    for i in range(10):
        note = root / ("daily" if i % 2 else "") / f"note{i}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"# Note {i}\n\n- point {i} with some text in it\n", encoding="utf-8")
    primer = tmp_path / "primer.txt"
    primer.write_text(DELIM.join(f"user: question {i}?\nassistant: answer {i}." for i in range(10)), encoding="utf-8")
    return StreamBuildConfig(
        roam_root=str(root), primer_path=str(primer), cache_dir=str(tmp_path / "cache"), seed=42, T=16
    )


def stamps(cache_dir) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) of every .bin: an atomic rewrite changes the inode."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(Path(cache_dir).glob("*.bin"))}


def byte_sources() -> dict[str, bytes]:
    """Three in-memory byte sources, each far longer than T+1 = 17 bytes."""
    return {
        "wiki": b"abcdefghijklmnopqrstuvwxyz" * 50,
        "roam": b"0123456789" * 200,
        "primer": b"system: x\nuser: y\nassistant: z\n" * 50,
    }
