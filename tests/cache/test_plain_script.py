"""The builders called from a plain script: at its top level without `if __name__ == "__main__":` (the
nanoGPT habit), and under the guard, each run as `python script.py` with 2 encoding workers."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BUILD = """\
tokenizer = SentencePieceTokenizer({model!r})
texts = [f"document {{i}}: the quick brown fox jumps over the lazy dog {{i % 7}} times." * 5 for i in range(300)]
build_pretrain_cache(texts, "pretrain", tokenizer=tokenizer, max_train_tokens=None, max_val_tokens=None,
                     seed=0, shuffle_buffer=None, num_threads=2)
chats = [[{{"role": "user", "content": f"hi {{i}}"}}, {{"role": "assistant", "content": f"hello {{i}}"}}]
         for i in range(100)]
build_sft_cache(chats, "sft", tokenizer=tokenizer, val_frac=0.1, seed=0, num_threads=2)
print("built")
"""
IMPORTS = """\
from niels_gpt.cache.build_cache import build_pretrain_cache, build_sft_cache
from niels_gpt.tokenizer import SentencePieceTokenizer
print("top level")
"""


def script(model: str, guarded: bool) -> str:
    build = BUILD.format(model=model)
    if guarded:
        return IMPORTS + 'if __name__ == "__main__":\n' + textwrap.indent(build, "    ")
    return IMPORTS + build


def run_script(folder: Path, text: str) -> subprocess.CompletedProcess:
    folder.mkdir()
    (folder / "build.py").write_text(text)
    return subprocess.run(
        [sys.executable, "build.py"], cwd=folder, capture_output=True, text=True, timeout=300, check=False
    )


def cache_bytes(folder: Path) -> dict[str, str]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "build.py")
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture(scope="module")
def runs(tiny_tokenizer_path, tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    root = tmp_path_factory.mktemp("scripts")
    return {
        kind: (run_script(root / kind, script(tiny_tokenizer_path, kind == "guarded")), root / kind)
        for kind in ("plain", "guarded")
    }


@pytest.mark.parametrize("kind", ["plain", "guarded"])
def test_the_script_builds_both_caches_and_runs_its_top_level_once(runs, kind):
    proc, folder = runs[kind]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["top level", "built"]  # the workers did not run the script again
    for word in ("Traceback", "Broken", "Error"):
        assert word not in proc.stderr, proc.stderr[-3000:]
    assert (folder / "pretrain" / "meta.json").is_file() and (folder / "sft" / "meta.json").is_file()


def test_the_guard_does_not_change_a_byte(runs):
    plain, guarded = (cache_bytes(runs[kind][1]) for kind in ("plain", "guarded"))
    assert any(name.endswith(".bin") for name in plain)
    assert plain == guarded
