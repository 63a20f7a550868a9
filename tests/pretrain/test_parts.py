"""Scale-out of a streamed pretrain source: N part caches over disjoint slices of the stream, merged.

Six local parquet files in fineweb-edu's schema stand in for the hub; parts read them through the
real registry -> hub -> datasets path (`IterableDataset.shard` before the buffer shuffle).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from niels_gpt.cache.cli import main
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.config import prepare_config
from niels_gpt.data.registry import pretrain_input
from niels_gpt.inspection.verify import verify
from niels_gpt.layout import part_name
from niels_gpt.meta import read_meta
from niels_gpt.pretrain.job import build_pretrain_source
from niels_gpt.pretrain.parts import merge_pretrain_parts, part_budget
from niels_gpt.shard_list import split_shards
from niels_gpt.token_files import DiskSequence, list_shards
from tests.support.corpus import tiny_corpus
from tests.support.hub_files import write_parquet

N_FILES, DOCS_PER_FILE = 6, 25
SHARD_BYTES = 1_000  # small: the merge re-shards across part boundaries


@pytest.fixture(scope="module")
def data(tmp_path_factory, isolated_hf_cache) -> tuple[str, list[str]]:  # noqa: F811
    """(glob of N_FILES parquet files, every document in file order)."""
    root = tmp_path_factory.mktemp("fineweb")
    texts = tiny_corpus(N_FILES * DOCS_PER_FILE, seed=9)
    for i in range(N_FILES):
        rows = texts[i * DOCS_PER_FILE : (i + 1) * DOCS_PER_FILE]
        write_parquet(root / f"train-{i:05d}.parquet", {"text": rows, "id": [f"doc{i}-{j}" for j in range(len(rows))]})
    return str(root / "*.parquet"), texts


def config(glob: str, train=None, val=None) -> dict:
    return prepare_config(
        {
            "demo": True,
            "seed": 5,
            "pretrain": {"shard_bytes": SHARD_BYTES},
            "sources": {
                "fineweb_edu": {
                    "demo_data_files": {"train": glob},
                    "max_train_tokens": train,
                    "max_val_tokens": val,
                    "val_doc_prob": 0.2,
                    "shuffle_buffer": 40,
                }
            },
        }
    )


def build(cfg: dict, out: Path, tok: str, n: int) -> dict:
    for k in range(n):
        build_pretrain_source(
            cfg,
            "fineweb_edu",
            tokenizer_path=tok,
            out_dir=out / "parts" / part_name(k),
            num_threads=1,
            log=lambda s: None,
            num_parts=n,
            part=k,
        )
    return merge_pretrain_parts(out / "parts", out, num_parts=n, source="fineweb_edu", log=lambda s: None)


def tokens(split_dir: Path) -> np.ndarray:
    """The ids of a split as readers see them (a manifest's parts' shards, end_eot applied)."""
    seq = DiskSequence(split_shards(split_dir.parent, split_dir.name))
    return seq.read(0, len(seq))


def docs(toks: np.ndarray, tok) -> list[str]:
    """Decoded eot-terminated documents (a trailing cut document included)."""
    cuts = np.flatnonzero(toks == tok.eot_id)
    bounds = zip(np.r_[0, cuts + 1], np.r_[cuts, len(toks)])
    return [tok.decode(toks[a:b].tolist()) for a, b in bounds if b > a]


def file_hashes(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and "parts" not in p.parts
    }


@pytest.fixture(scope="module")
def unlimited(data, tiny_tokenizer_path, tmp_path_factory) -> dict[int, Path]:
    """n -> merged cache of n parts, budgets unlimited."""
    glob, _ = data
    outs = {}
    for n in (2, 4):
        outs[n] = tmp_path_factory.mktemp(f"unlimited{n}")
        build(config(glob), outs[n], tiny_tokenizer_path, n)
    return outs


@pytest.mark.parametrize("n", [2, 4])
def test_parts_are_disjoint_and_cover_every_document_once(unlimited, data, tiny_tokenizer, n):
    out, (_, texts) = unlimited[n], data
    part_docs = [
        Counter(d for s in ("train", "val") for d in docs(tokens(out / "parts" / part_name(k) / s), tiny_tokenizer))
        for k in range(n)
    ]
    for a in range(n):
        for b in range(a + 1, n):
            assert not part_docs[a] & part_docs[b], (a, b)
    assert sum(part_docs, Counter()) == Counter(texts)
    meta = read_meta(str(out / "meta.json"))
    merged = {s: tokens(out / s) for s in ("train", "val")}
    assert Counter(d for s in merged.values() for d in docs(s, tiny_tokenizer)) == Counter(texts)
    for s in ("train", "val"):  # concatenation in part order, nothing cut when budgets are unlimited
        want = np.concatenate([tokens(out / "parts" / part_name(k) / s) for k in range(n)])
        assert np.array_equal(merged[s], want)
        assert meta[f"{s}_tokens"] == len(merged[s]) == sum(p[f"{s}_tokens"] for p in meta["parts"])
    assert meta["num_parts"] == n and [p["index"] for p in meta["parts"]] == list(range(n))
    assert meta["part_boundary_cuts"] == {"train": 0, "val": 0} and meta["seed"] == 5
    assert (
        meta["documents_seen"] == len(texts) and meta["cleaning"] == {"skipped_blank": 0} and not meta["empty_splits"]
    )


def test_part_seeds_differ_and_are_recorded(unlimited):
    metas = [read_meta(str(unlimited[4] / "parts" / part_name(k) / "meta.json")) for k in range(4)]
    seeds = [m["seed"] for m in metas]
    assert len(set(seeds)) == 4 and 5 not in seeds
    assert [m["provenance"]["part"]["part_seed"] for m in metas] == seeds
    streams = [m["provenance"]["stream"] for m in metas]
    assert [len(s["part_data_files"]) for s in streams] == [2, 2, 1, 1]  # 6 files: the first 6 % 4 parts get one more
    assert sum((s["part_data_files"] for s in streams), []) == [f["path"] for f in streams[0]["data_files"]]


def test_budgets_are_exact_after_merge(data, tiny_tokenizer_path, tiny_tokenizer, tmp_path):
    meta = build(config(data[0], train=2_001, val=303), tmp_path, tiny_tokenizer_path, 4)
    assert (meta["train_tokens"], meta["val_tokens"]) == (2_001, 303)
    assert (meta["max_train_tokens"], meta["max_val_tokens"]) == (2_001, 303)
    assert [p["train_tokens"] for p in meta["parts"]] == [501, 500, 500, 500]
    assert [p["val_tokens"] for p in meta["parts"]] == [76, 76, 76, 75]
    eot = tiny_tokenizer.eot_id
    for s in ("train", "val"):
        merged = tokens(tmp_path / s)
        ends = np.cumsum([p[f"{s}_tokens"] for p in meta["parts"]])
        assert all(merged[e - 1] == eot for e in ends[:-1])  # documents stay eot-separated across parts
        assert meta[f"{s}_documents"] == sum(p[f"{s}_documents"] for p in meta["parts"])
    assert meta["part_boundary_cuts"] == {"train": 3, "val": 3}
    assert "4 parts" in meta["split_rule"] and "B // 4" in meta["split_rule"]
    _, checks, stray = verify(tmp_path, tokenizer_path=tiny_tokenizer_path)
    assert [(c.status, c.problems) for c in checks] == [("ok", [])] and not stray


def test_part_budget_shares_add_up():
    for budget in (0, 1, 3, 10, 2_001):
        for n in (1, 2, 3, 7):
            shares = [part_budget(budget, n, k) for k in range(n)]
            assert sum(shares) == budget and max(shares) - min(shares) <= 1
    assert part_budget(None, 4, 2) is None


def test_merge_is_byte_identical_and_clears_stale_outputs(unlimited, tiny_tokenizer_path, tmp_path, capsys):
    out = unlimited[2]
    first = file_hashes(out)
    assert list(first) == ["meta.json"]  # the merge writes the manifest and nothing else
    stale = out / "train" / "shard_00099.bin"  # as a copy merge (format 4) left them
    stale.parent.mkdir()
    stale.write_bytes(b"\0\0")
    rc = main(
        [
            "merge-pretrain",
            "--source",
            "fineweb_edu",
            "--out-dir",
            str(out),
            "--set",
            "pretrain.num_parts=2",
            "--set",
            f"pretrain.shard_bytes={SHARD_BYTES}",
            "--spec",
            "{}",
        ]
    )
    assert rc == 0 and "merging 2 parts" in capsys.readouterr().err
    assert not stale.exists() and not stale.parent.exists() and file_hashes(out) == first
    _, checks, _ = verify(out, tokenizer_path=tiny_tokenizer_path)
    assert [c.status for c in checks] == ["ok"]
    ds = PretrainTokenStreamDataset(out / "train", T=16)
    import torch

    x, y = ds.get_batch(B=4, generator=torch.Generator().manual_seed(0))
    assert x.shape == (4, 16) and bool((y[:, :-1] == x[:, 1:]).all())


def test_cli_builds_a_part_like_the_api(data, unlimited, tiny_tokenizer_path, tmp_path):
    glob, _ = data
    spec = {
        "seed": 5,
        "demo": True,
        "pretrain": {"num_parts": 4, "shard_bytes": SHARD_BYTES},
        "sources": {
            "fineweb_edu": {
                "demo_data_files": {"train": glob},
                "val_doc_prob": 0.2,
                "shuffle_buffer": 40,
                "max_train_tokens": None,
                "max_val_tokens": None,
            }
        },
    }
    rc = main(
        [
            "build-pretrain",
            "--source",
            "fineweb_edu",
            "--part",
            "3",
            "--tokenizer",
            tiny_tokenizer_path,
            "--out-dir",
            str(tmp_path),
            "--num-threads",
            "1",
            "--spec",
            json.dumps(spec),
        ]
    )
    assert rc == 0
    want = unlimited[4] / "parts" / part_name(3)
    assert read_meta(str(tmp_path / "meta.json"))["shards"] == read_meta(str(want / "meta.json"))["shards"]


def test_fewer_data_files_than_parts_names_both_numbers(data, tiny_tokenizer_path, tmp_path):
    with pytest.raises(ValueError, match=r"has 6 data file\(s\).*but 8 parts"):
        build(config(data[0]), tmp_path, tiny_tokenizer_path, 8)


def test_presplit_sources_are_not_split():
    with pytest.raises(ValueError, match="wikitext.*one job"):
        pretrain_input(prepare_config({}), "wikitext", num_parts=2, part=0)


def test_merge_refuses_a_missing_or_cut_part(unlimited, tmp_path):
    import shutil

    parts = tmp_path / "parts"
    shutil.copytree(unlimited[2] / "parts", parts)
    shard = list_shards(parts / part_name(1) / "train")[0]
    shard.write_bytes(shard.read_bytes()[:-2])  # one token short of what its part's meta.json lists
    with pytest.raises(ValueError, match=r"part_001/train/shard_00000.bin: [\d,]+ bytes, .* rebuild that part"):
        merge_pretrain_parts(parts, tmp_path, num_parts=2)
    assert not (tmp_path / "meta.json").exists()
    (parts / part_name(1) / "meta.json").unlink()
    with pytest.raises(FileNotFoundError, match="part_001/meta.json: part 1 of 2 is missing"):
        merge_pretrain_parts(parts, tmp_path, num_parts=2)
    with pytest.raises(ValueError, match=r"part_000/meta.json: is part 0 of 2, expected part 0 of 1"):
        merge_pretrain_parts(parts, tmp_path, num_parts=1)


def test_merge_ignores_parts_left_by_a_larger_num_parts(unlimited, tmp_path):
    import shutil

    shutil.copytree(unlimited[2] / "parts", tmp_path / "parts")
    shutil.copytree(unlimited[4] / "parts" / part_name(3), tmp_path / "parts" / part_name(3))
    lines = []
    merge_pretrain_parts(tmp_path / "parts", tmp_path, num_parts=2, log=lines.append)
    assert file_hashes(tmp_path) == file_hashes(unlimited[2]) and "ignoring part_003" in lines[0]


def rows_destroyed(parquet: bytes) -> bytes:
    """The file with every byte between the leading magic and the footer overwritten: its schema (in the
    footer) still reads - datasets reads the first file's schema in every part - its rows do not."""
    footer = int.from_bytes(parquet[-8:-4], "little") + 8
    return parquet[:4] + b"\xff" * (len(parquet) - footer - 4) + parquet[-footer:]


def test_a_part_reads_rows_only_from_its_own_data_files(data, unlimited, tiny_tokenizer_path, tmp_path):
    glob, _ = data
    meta = read_meta(str(unlimited[2] / "parts" / part_name(1) / "meta.json"))
    mine = {Path(p).name for p in meta["provenance"]["stream"]["part_data_files"]}
    assert mine and len(mine) < N_FILES
    for f in sorted(Path(glob).parent.glob("*.parquet")):  # the other part's rows become unreadable
        (tmp_path / f.name).write_bytes(f.read_bytes() if f.name in mine else rows_destroyed(f.read_bytes()))
    other = next(p for p in sorted(tmp_path.glob("*.parquet")) if p.name not in mine)
    with pytest.raises(OSError, match="page header"):  # the control: a destroyed file's rows do not read
        pq.read_table(other)
    build_pretrain_source(
        config(str(tmp_path / "*.parquet")),
        "fineweb_edu",
        tokenizer_path=tiny_tokenizer_path,
        out_dir=tmp_path / "part_001",
        num_threads=1,
        log=lambda s: None,
        num_parts=2,
        part=1,
    )
    for s in ("train", "val"):
        assert np.array_equal(tokens(tmp_path / "part_001" / s), tokens(unlimited[2] / "parts" / part_name(1) / s))


def test_a_part_may_hold_no_val_but_the_merge_fails_when_the_whole_source_would(data, tiny_tokenizer_path, tmp_path):
    glob, _ = data
    cfg = config(glob, train=None, val=10_000)
    cfg["sources"]["fineweb_edu"]["val_doc_prob"] = 0.0
    with pytest.raises(ValueError) as e:
        build(cfg, tmp_path, tiny_tokenizer_path, 2)  # both parts build (no val each); the merge refuses
    assert str(e.value).startswith(
        f"fineweb_edu: the val split would hold 0 tokens (documents read: {N_FILES * DOCS_PER_FILE:,}, blank: 0; "
        "split by sources.fineweb_edu.val_doc_prob=0.0)"
    )
    assert all((tmp_path / "parts" / part_name(k) / "meta.json").is_file() for k in range(2))
    assert not (tmp_path / "meta.json").exists() and not (tmp_path / "train").exists()


def mismatched_parts(unlimited, tmp_path, edit) -> Path:
    """A copy of the 2-part build whose part 1 meta.json `edit` changed (as if built otherwise)."""
    import shutil

    parts = tmp_path / "parts"
    shutil.copytree(unlimited[2] / "parts", parts)
    path = parts / part_name(1) / "meta.json"
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))
    return parts


def _set(*keys, value):
    def edit(meta):
        node = meta
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            _set("dataset_revision", value="1" * 40),
            f"dataset_revision='{'1' * 40}' but part 0 has None; the hub moved between the part jobs: pin "
            "sources.<source>.revision to a commit, then rebuild the parts",
        ),
        (
            _set("tokenizer_sha256", value="f" * 64),
            "tokenizer_sha256='" + "f" * 64 + "' but part 0 has '{sha}'; every part must come from one config and "
            "tokenizer, then rebuild the parts",
        ),
        (_set("vocab_size", value=999), "vocab_size=999 but part 0 has 404; every part must come from one config"),
        (_set("format_version", value=0), "format_version=0 but part 0 has"),
        (_set("val_doc_prob", value=0.5), "val_doc_prob=0.5 but part 0 has 0.2;"),
        (_set("shuffle_buffer", value=7), "shuffle_buffer=7 but part 0 has 40;"),
        (
            _set("provenance", "part", "seed", value=6),
            "provenance.part.seed=6 but part 0 has 5; rebuild the parts with one config",
        ),
        (
            _set("provenance", "part", "max_train_tokens", value=10),
            "provenance.part.max_train_tokens=10 but part 0 has None",
        ),
        (_set("provenance", "source", value="gutenberg"), "a part of source 'gutenberg', not 'fineweb_edu'"),
        (_set("provenance", "part", "index", value=0), "is part 0 of 2, expected part 1 of 2"),
        (_set("built", value=False), "not a built part cache (built=False, no provenance.part)"),
    ],
)
def test_merge_refuses_parts_that_do_not_belong_together(unlimited, tiny_tokenizer, tmp_path, edit, message):
    parts = mismatched_parts(unlimited, tmp_path, edit)
    with pytest.raises(ValueError) as e:
        merge_pretrain_parts(parts, tmp_path / "out", num_parts=2, source="fineweb_edu")
    assert str(e.value).startswith(f"{parts / part_name(1) / 'meta.json'}: ")
    assert message.format(sha=tiny_tokenizer.sha256) in str(e.value)
    assert not (tmp_path / "out").exists()  # refused before anything is written


# -- the manifest: every reader reads the parts through it ----------------------------------------------


def copy_merged(parts: Path, n: int, split: str, eot: int) -> np.ndarray:
    """What the copy merge (format 4) wrote for `split`, from the part files alone: the parts' shards in part
    order, a part's last token replaced by eot where it is not one and a later part holds tokens."""
    pieces = []
    for k in range(n):
        meta = read_meta(parts / part_name(k) / "meta.json")
        files = [parts / part_name(k) / split / s["file"] for s in meta["shards"][split]]
        pieces.append(np.concatenate([np.fromfile(f, dtype="<u2") for f in files] or [np.zeros(0, "<u2")]))
    for k in range(n - 1):
        if len(pieces[k]) and pieces[k][-1] != eot and any(len(p) for p in pieces[k + 1 :]):
            pieces[k] = pieces[k].copy()
            pieces[k][-1] = eot
    return np.concatenate(pieces)


def sha(*arrays: np.ndarray) -> str:
    return hashlib.sha256(b"".join(np.ascontiguousarray(a, dtype="<u2").tobytes() for a in arrays)).hexdigest()


@pytest.fixture(scope="module", params=[2, 3])
def cut_tree(request, data, tiny_tokenizer_path, tmp_path_factory) -> tuple[Path, int]:
    """(cache root, n): fineweb_edu merged from n parts whose budgets cut documents at every part boundary."""
    root = tmp_path_factory.mktemp(f"cut{request.param}")
    build(config(data[0], train=2_001, val=303), root / "pretrain" / "fineweb_edu", tiny_tokenizer_path, request.param)
    return root, request.param


def test_every_reader_sees_the_ids_of_the_copy_merge(cut_tree, tiny_tokenizer, tiny_tokenizer_path):
    from niels_gpt.inspection.info import collect_info
    from niels_gpt.report.corpora import find_splits
    from niels_gpt.report.stats import document_stats

    root, n = cut_tree
    out, eot = root / "pretrain" / "fineweb_edu", tiny_tokenizer.eot_id
    meta = read_meta(out / "meta.json")
    assert sum(meta["part_boundary_cuts"].values()) > 0  # the override is exercised
    want = {s: copy_merged(out / "parts", n, s, eot) for s in ("train", "val")}
    datasets = {s: PretrainTokenStreamDataset(out / s, T=8, tokenizer=tiny_tokenizer) for s in ("train", "val")}
    seen = {
        "dataset": [np.concatenate(datasets[s].maps) for s in ("train", "val")],
        "walker": [tokens(out / s) for s in ("train", "val")],
        "report": [s.sequence().read(0, len(s.sequence())) for s in find_splits(root)[0]],
    }
    assert len(seen["report"]) == 2
    for reader, arrays in seen.items():
        assert sha(*arrays) == sha(want["train"], want["val"]), reader
    for s in ("train", "val"):
        stats = document_stats(find_splits(root)[0][s == "val"].files, eot)
        assert stats["tokens"] == meta[f"{s}_tokens"] and stats["documents"] == meta[f"{s}_documents"]
    rows, _, _ = collect_info(out, tokenizer_path=None)
    assert [(r.split, r.tokens, r.units) for r in rows] == [
        (s, meta[f"{s}_tokens"], meta[f"{s}_documents"]) for s in ("train", "val")
    ]
    _, checks, _ = verify(root / "pretrain" / "fineweb_edu", tokenizer_path=tiny_tokenizer_path)
    assert [(c.status, c.problems) for c in checks] == [("ok", [])]
    selection, checks, _ = verify(out / "val", tokenizer_path=tiny_tokenizer_path)  # a split: no folder, its files
    assert selection.split == "val" and [c.status for c in checks] == ["ok"]


def test_windows_and_loaders_read_the_parts_shards_with_the_boundary_eot(cut_tree, tiny_tokenizer):
    import torch

    from niels_gpt.cache.loader import MixedLoader
    from niels_gpt.training.torch_data import PretrainWindows

    root, n = cut_tree
    out, T = root / "pretrain" / "fineweb_edu", 8
    ds = PretrainTokenStreamDataset(out / "train", T=T)
    want = copy_merged(out / "parts", n, "train", tiny_tokenizer.eot_id)
    starts = np.cumsum([0, *ds.shard_tokens])  # each file's place in the split: a window never spans two
    assert len(ds.maps) == sum(
        len(read_meta(out / "parts" / part_name(k) / "meta.json")["shards"]["train"]) for k in range(n)
    )
    which, start = ds.locate(np.arange(len(ds)))
    x, y = ds.rows(np.arange(len(ds)))
    for i, (w, s) in enumerate(zip(which.tolist(), start.tolist())):
        at = int(starts[ds.usable_shards[w]]) + s
        assert np.array_equal(np.r_[x[i], y[i, -1]], want[at : at + T + 1])
    items = PretrainWindows(out / "train", T=T)
    assert len(items) == len(ds) and np.array_equal(items[3]["input_ids"].numpy(), x[3])
    g = lambda: torch.Generator().manual_seed(1)  # noqa: E731
    resident = PretrainTokenStreamDataset(out / "train", T=T, resident=True)
    for a, b in zip(ds.get_batch(B=16, generator=g()), resident.get_batch(B=16, generator=g())):
        assert torch.equal(a, b)
    for mode in ("random", "epoch"):
        plain, res = (
            MixedLoader.pretrain(root, p={"fineweb_edu": 1.0}, T=T, B=4, seed=0, mode=mode, resident=r)
            for r in (False, True)
        )
        for _ in range(3):
            a, b = next(plain), next(res)
            assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
            for row in torch.cat([a.x, a.y[:, -1:]], dim=1).numpy():  # every row is T+1 ids of the split
                assert any(np.array_equal(row, want[i : i + T + 1]) for i in range(len(want) - T))


def test_the_merge_writes_only_a_manifest_with_relative_paths(cut_tree, tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    import shutil

    root, n = cut_tree
    out = root / "pretrain" / "fineweb_edu"
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "parts"]
    meta = read_meta(out / "meta.json")
    listed = [e for s in ("train", "val") for e in meta["shards"][s]]
    assert all(e["path"].startswith("parts/part_") and (out / e["path"]).is_file() for e in listed)
    assert [e["part"] for e in meta["shards"]["train"]] == sorted(e["part"] for e in meta["shards"]["train"])
    assert sum(e.get("end_eot", False) for e in listed) == sum(meta["part_boundary_cuts"].values())
    assert [p["meta"] for p in meta["parts"]] == [f"parts/{part_name(k)}/meta.json" for k in range(n)]
    moved = tmp_path / "elsewhere" / "fineweb_edu"  # the source folder copied whole: it reads and verifies there
    shutil.copytree(out, moved)
    _, checks, _ = verify(moved, tokenizer_path=tiny_tokenizer_path)
    assert [(c.status, c.problems) for c in checks] == [("ok", [])]
    a = PretrainTokenStreamDataset(out / "val", T=4, tokenizer=tiny_tokenizer)
    b = PretrainTokenStreamDataset(moved / "val", T=4, tokenizer=tiny_tokenizer)
    assert sha(*a.maps) == sha(*b.maps) and a.identity == b.identity


def copy_of(cut_tree, tmp_path) -> Path:
    import shutil

    out = tmp_path / "pretrain" / "fineweb_edu"  # in a family folder: verify knows it without its meta.json
    shutil.copytree(cut_tree[0] / "pretrain" / "fineweb_edu", out)
    return out


def test_verify_names_a_missing_or_changed_part_file_and_the_part_to_rebuild(cut_tree, tmp_path, tiny_tokenizer_path):
    from niels_gpt.inspection.verify import fix_command

    out = copy_of(cut_tree, tmp_path)
    shard = out / "parts" / part_name(1) / "train" / "shard_00000.bin"
    shard.write_bytes(shard.read_bytes()[::-1])  # same size, other bytes
    (out / "parts" / part_name(0) / "val" / "shard_00000.bin").unlink()
    _, (check,), _ = verify(out, tokenizer_path=tiny_tokenizer_path)
    assert check.status == "FAIL"
    assert any(
        p.startswith("parts/part_001/train/shard_00000.bin: sha256 ")
        and p.endswith("[a file of part 1: rebuild that part]")
        for p in check.problems
    ), check.problems
    assert any(p.startswith("parts/part_000/val/shard_00000.bin: missing") for p in check.problems), check.problems
    assert check.rebuild == [out / "parts" / part_name(1) / "meta.json", out / "parts" / part_name(0) / "meta.json"]
    cfg = prepare_config({})
    fix = fix_command(check, tmp_path, cfg)
    assert fix.startswith(f"snakemake -f {out}/parts/part_001/meta.json {out}/parts/part_000/meta.json")
    with pytest.raises(ValueError, match=r"val: shards on disk .* do not match"):
        PretrainTokenStreamDataset(out / "val", T=4)


def test_a_part_rebuilt_after_the_merge_makes_the_manifest_stale(cut_tree, tmp_path, tiny_tokenizer_path):
    out = copy_of(cut_tree, tmp_path)
    part = out / "parts" / part_name(1) / "meta.json"
    meta = json.loads(part.read_text())
    meta["documents_seen"] += 1  # as if rebuilt: its meta.json (sha256) differs from the one merged
    part.write_text(json.dumps(meta))
    stale = r"parts/part_001/meta.json: sha256 \w+\.\.\. differs from the merged part's \w+\.\.\.: part 1 was rebuilt"
    with pytest.raises(ValueError, match=f"meta.json is stale: {stale}"):
        PretrainTokenStreamDataset(out / "train", T=4)
    _, (check,), _ = verify(out, tokenizer_path=tiny_tokenizer_path)
    assert check.status == "FAIL" and any(re.match(stale, p) for p in check.problems), check.problems
    merge_pretrain_parts(out / "parts", out, num_parts=cut_tree[1], log=lambda s: None)  # merging again fixes it
    _, (check,), _ = verify(out, tokenizer_path=tiny_tokenizer_path)
    assert check.status == "ok"


def test_a_merge_stopped_before_its_meta_json_is_written_leaves_no_manifest(
    cut_tree, tmp_path, tiny_tokenizer_path, monkeypatch
):
    import niels_gpt.pretrain.parts as parts

    out = copy_of(cut_tree, tmp_path)

    def killed(path, meta):
        raise KeyboardInterrupt

    monkeypatch.setattr(parts, "write_meta", killed)
    with pytest.raises(KeyboardInterrupt):
        merge_pretrain_parts(out / "parts", out, num_parts=cut_tree[1])
    assert sorted(p.name for p in out.iterdir()) == ["parts"]
    _, (check,), _ = verify(out, tokenizer_path=tiny_tokenizer_path)
    assert check.status == "FAIL" and check.problems[0].startswith("no meta.json")
