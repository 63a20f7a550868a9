"""The Snakemake DAG end to end on the bundled sample data (demo=true), in a scratch copy.

One small build (tiny tokenizer, small sample) is shared by the tests below and never changed: a test
that edits inputs, deletes artifacts or rebuilds works on its own copy of it (`copy_of_built`), so the
tests pass in any order. Each test asserts what a user relies on: a second run has nothing to do,
changing one value re-runs exactly the jobs that depend on it, editing one input file rebuilds only its
artifacts, a deleted artifact comes back, the caches are byte-identical whatever -j, and a source split
into parts (pretrain.num_parts) builds, merges and verifies. The build reads the sample data as real
corpora come: raw Project Gutenberg books (BOM, CRLF, license header and footer) in two files, Roam pages
of both export shapes with awkward file names (a newline among them), fineweb files with and without
`date`, oasst1 files whose nested columns are structs or null; the caches it writes must be clean.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from niels_gpt import layout
from tests.support.build_all import build_all_like_workflow, differing

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

# Small but real: every rule runs on the sample data through the same code path as the hub.
SMALL = {
    "demo": True,
    "cache_dir": "cache",  # the demo's default folder is cache-demo/; these tests read cache/ as a real build would
    "tokenizer": {"vocab_size": 600, "sample_chars": 300_000},
    "sources": {
        "fineweb_edu": {"max_train_tokens": 60_000, "max_val_tokens": 4_000, "val_doc_prob": 0.1},
        "wikitext": {"max_train_tokens": 60_000},
        "gutenberg": {  # the raw dataset: four books in the raw layout, in two files (make_workdir)
            "enabled": True,
            "dataset_id": "manu/project_gutenberg",
            "split": "en",
            "demo_data_files": {"en": "gutenberg_raw/*.parquet"},
            "max_train_tokens": 20_000,
            "max_val_tokens": 2_000,
            "val_doc_prob": 0.5,
        },
        "roam": {"demo_root": "notes"},
    },
    "pretrain": {"shard_bytes": 40_000},
    "sft": {"t_max": 256},
    "dedup": {"read_margin": 0.25},  # the generated text repeats phrases: curation cuts ~7 %, budgets stay exact
}


def copy_workflow(dest: Path, overrides: dict) -> Path:
    """The workflow, the primer files and the sample notes (as `notes/`) in a scratch folder, `overrides`
    as overrides.yaml."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config.yaml", "environment.yml"):
        shutil.copy(ROOT / name, dest / name)
    for name in ("rules", "profiles"):
        shutil.copytree(ROOT / name, dest / name)
    (dest / "data").mkdir()
    for name in ("primer.jsonl", "primer.txt"):
        shutil.copy2(ROOT / "data" / name, dest / "data" / name)  # keep mtimes: stream metas record them
    shutil.copytree(ROOT / "data" / "sample" / "roam", dest / "notes")
    (dest / "overrides.yaml").write_text(json.dumps(overrides))
    return dest


def make_workdir(dest: Path) -> Path:
    """A scratch copy of the workflow; sample data linked, the files the tests edit copied."""
    copy_workflow(dest, SMALL)
    (dest / "data" / "sample").symlink_to(ROOT / "data" / "sample")
    odd = dest / "notes" / "Two\nlines.md"  # a page title with a line break, as Roam allows
    odd.write_text("- a page whose title has a line break\n", encoding="utf-8")
    shutil.copystat(ROOT / "data" / "sample" / "roam" / "Appeals.md", odd)  # the streams' meta records mtimes
    split_in_two(ROOT / "data" / "sample" / "gutenberg_raw" / "en-00000-of-00001.parquet", dest / "gutenberg_raw")
    return dest


def split_in_two(parquet: Path, out_dir: Path) -> None:
    """The rows of `parquet` as two files, as the hub shards a dataset: a streamed source needs at least
    pretrain.num_parts data files to be split into parts."""
    import pyarrow.parquet as pq

    table = pq.read_table(parquet)
    out_dir.mkdir()
    half = table.num_rows // 2
    for k, part in enumerate((table.slice(0, half), table.slice(half))):
        pq.write_table(part, out_dir / f"en-{k:05d}-of-00002.parquet")


# No network for anything the workflow starts: hub access off, and any other HTTP(S) request goes to a dead proxy.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    **{k: "http://127.0.0.1:9" for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")},
}


def snakemake(
    workdir: Path, *args: str, extra_config: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, "--configfile", "config.yaml", "overrides.yaml", *args]
    env = {**os.environ, **OFFLINE, "HF_HOME": str(workdir / ".hf")}
    with tempfile.TemporaryDirectory() as scratch:  # outside the workdir: a dry run changes nothing there
        if extra_config:
            extra = Path(scratch) / "extra.yaml"
            extra.write_text(json.dumps(extra_config))
            cmd[6:6] = [str(extra)]  # after overrides.yaml: applied last
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env, timeout=900)
    if check and proc.returncode != 0:
        logs = "".join(f"\n--- {p}\n{p.read_text()[-3000:]}" for p in (workdir / "cache" / "logs").rglob("*.log"))
        pytest.fail(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}{logs}")
    return proc


def planned_jobs(workdir: Path, *args: str, extra_config: dict | None = None) -> dict[str, int]:
    """rule -> job count that a dry run of cache/all would execute."""
    out = snakemake(workdir, "-n", "cache/all", *args, extra_config=extra_config).stdout
    if "Nothing to be done" in out:
        return {}
    table = out.split("Job stats:")[1].split("Reasons:")[0] if "Job stats:" in out else out
    jobs = {}
    for line in table.splitlines():
        m = re.match(r"^(\w+)\s+(\d+)\s*$", line.strip())
        if m and m.group(1) != "total":
            jobs[m.group(1)] = int(m.group(2))
    return jobs


def artifact_hashes(cache: Path) -> dict[str, str]:
    skip = ("logs", "benchmarks")
    return {
        str(p.relative_to(cache)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(cache.rglob("*"))
        if p.is_file() and p.relative_to(cache).parts[0] not in skip and p.name != "all"
    }


@pytest.fixture(scope="module")
def built(workflow_demo_build) -> Path:
    """The demo build every test shares (built once per session: tests/conftest.py, which build-all's
    byte-identity test reads too). Read-only: a test that changes anything uses copy_of_built."""
    return workflow_demo_build


@pytest.fixture
def copy_of_built(built, tmp_path) -> Path:
    """This test's own copy of the built workdir: files, mtimes and Snakemake's records of the jobs."""
    return Path(shutil.copytree(built, tmp_path / "wf", symlinks=True))


def verify_all(cache: Path) -> list:
    """`verify` of the whole cache tree: every check's (artifact, status, problems)."""
    from niels_gpt.inspection.verify import verify

    _, checks, stray = verify(cache)
    assert stray == []
    return [(c.artifact.name, c.status, c.problems) for c in checks]


def test_demo_build_produces_every_artifact_and_verifies(built):
    cache = built / "cache"
    assert (cache / "all").exists()
    for s in ("fineweb_edu", "wikitext", "gutenberg", "roam"):
        meta = json.loads((cache / "pretrain" / s / "meta.json").read_text())
        assert meta["train_tokens"] > 0 and meta["val_tokens"] > 0, s
        assert list((cache / "pretrain" / s / "train").glob("shard_*.bin"))
    for s in ("dolly15k", "oasst1", "primer"):
        meta = json.loads((cache / "sft" / s / "meta.json").read_text())
        assert meta["train_examples"] > 0 and meta["val_examples"] > 0, s
    for s in ("wiki", "roam", "primer"):
        for split in ("train", "val"):
            assert (cache / "streams" / f"{s}_{split}.bin").stat().st_size > 256
    tok = json.loads((cache / "tokenizer" / "meta.json").read_text())
    assert tok["vocab_size"] == 604
    checks = verify_all(cache)
    assert len(checks) == 1 + 4 + 3 + 6 and all(status == "ok" for _, status, _ in checks), checks


def decoded_documents(cache: Path, tokenizer) -> dict[str, list[str]]:
    """Every pretrain document (between eot ids) and SFT example of the cache, decoded, by artifact."""
    import numpy as np

    eot, out = tokenizer.eot_id, {}
    for shard_dir in sorted((cache / "pretrain").glob("*/*")):
        shards = sorted(shard_dir.glob("shard_*.bin"))
        if shard_dir.name in ("train", "val") and shards:
            tokens = np.concatenate([np.fromfile(p, dtype="<u2") for p in shards]).tolist()
            docs, cur = [], []
            for t in tokens:
                if t == eot:
                    docs.append(tokenizer.decode(cur))
                    cur = []
                else:
                    cur.append(t)
            out[f"pretrain/{shard_dir.parent.name}/{shard_dir.name}"] = docs + ([tokenizer.decode(cur)] if cur else [])
    for tokens_bin in sorted((cache / "sft").glob("*/*_tokens.bin")):
        tokens = np.fromfile(tokens_bin, dtype="<u2")
        starts = np.append(np.load(str(tokens_bin).replace("_tokens.bin", "_idx.npy")), len(tokens))
        out[f"sft/{tokens_bin.parent.name}/{tokens_bin.name}"] = [
            tokenizer.decode([t for t in tokens[a:b].tolist() if t > 4]) for a, b in zip(starts[:-1], starts[1:])
        ]
    return out


def test_demo_caches_hold_no_bom_no_carriage_return_no_boilerplate_no_blank_document(built):
    from niels_gpt.tokenizer import SentencePieceTokenizer

    cache = built / "cache"
    docs = decoded_documents(cache, SentencePieceTokenizer(cache / "tokenizer" / "spm.model"))
    streams = {p.name: p.read_bytes().decode("utf-8") for p in (cache / "streams").glob("*.bin")}
    assert len(docs) == 14 and len(streams) == 6  # 4 pretrain x 2 splits, 3 SFT x 2 splits
    for name, text in [(k, d) for k, ds in docs.items() for d in ds] + list(streams.items()):
        assert "\ufeff" not in text and "\r" not in text, name
    for name, ds in docs.items():
        assert all(d.strip() for d in ds), f"{name}: a blank document"
    boilerplate = (
        "PROJECT GUTENBERG",
        "Project Gutenberg",
        "Release date:",
        "SMALL PRINT",
        "FULL LICENSE",
        "Section 1.",
    )
    gutenberg = docs["pretrain/gutenberg/train"] + docs["pretrain/gutenberg/val"]
    assert len(gutenberg) >= 3 and not any(b in d for d in gutenberg for b in boilerplate)
    metas = {s: json.loads((cache / "pretrain" / s / "meta.json").read_text()) for s in ("gutenberg", "roam")}
    # every book written was stripped, and only those are counted (not the ones read ahead for the workers)
    assert metas["gutenberg"]["cleaning"]["boilerplate_books_stripped"] == metas["gutenberg"]["documents_seen"] >= 3
    assert metas["roam"]["cleaning"]["skipped_blank"] == 2  # "Empty page" and "Untitled"
    roam_files = metas["roam"]["provenance"]["files"]
    assert "Two\nlines.md" in roam_files["train"] + roam_files["val"]
    assert {" Leading space.md", "Projects/Harbour Survey/Budget.md"} <= set(roam_files["train"] + roam_files["val"])
    fineweb = json.loads((cache / "pretrain" / "fineweb_edu" / "meta.json").read_text())
    assert len(fineweb["provenance"]["stream"]["data_files"]) == 2  # with and without `date`
    oasst1 = json.loads((cache / "sft" / "oasst1" / "meta.json").read_text())
    assert len(oasst1["provenance"]["data_files"]) == 2 and oasst1["train_examples"] > 0  # struct and null columns
    dolly = json.loads((cache / "sft" / "dolly15k" / "meta.json").read_text())
    assert dolly["truncation"] == "prompt" and dolly["num_dropped"] == {"train": 0, "val": 0}


def test_caches_are_byte_identical_at_any_j(built, tmp_path):
    other = make_workdir(tmp_path / "j1")
    snakemake(other, "-j1", "cache/all")
    assert artifact_hashes(other / "cache") == artifact_hashes(built / "cache")


def test_second_run_has_nothing_to_do(built):
    assert planned_jobs(built) == {}


def test_changing_a_tokenizer_key_rebuilds_the_tokenizer_and_everything_tokenized(built):
    jobs = planned_jobs(built, extra_config={"tokenizer": {"vocab_size": 620}})
    assert jobs.get("tokenizer") == 1
    assert jobs.get("pretrain") == 4 and jobs.get("sft") == 3
    assert "streams" not in jobs  # byte streams do not use the tokenizer


# Curation is global (rules/curation.smk): a changed raw pretrain or SFT cache re-runs curate, every apply
# job (each rewrites its curated cache from the new decisions) and the certificate; then the report jobs
# that read the pretrain / SFT / stream caches (rules/report.smk), besides cache/all. The leakage audit is one
# part per space joined by `leakage`: the certificate's scan writes the token part, leakage_space the bytes part.
CURATION = {"curate": 1, "curate_pretrain": 4, "curate_sft": 3, "certificate": 1}
AUDIT = {"leakage": 1, "report_leakage": 1}
READS_TOKEN_CACHES = {"report_pretrain": 1, "report_sft": 1, "report_tokenizer": 1, **AUDIT}
READS_PRETRAIN = READS_SFT = {**CURATION, **READS_TOKEN_CACHES, "all": 1}
READS_STREAMS = {"report_streams": 1, "leakage_space": 1, **AUDIT, "all": 1}


def test_changing_a_budget_reruns_only_that_source_and_the_report_jobs_reading_it(built):
    jobs = planned_jobs(built, extra_config={"sources": {"fineweb_edu": {"max_train_tokens": 50_000}}})
    assert jobs == {"pretrain": 1, **READS_PRETRAIN}


def test_report_settings_rerun_only_the_report_jobs_using_them(built):
    mix = {"primer": 0.2, "oasst1": 0.6, "dolly15k": 0.2}
    assert planned_jobs(built, extra_config={"sft": {"mix": mix}}) == {"report_sft": 1, "all": 1}
    jobs = planned_jobs(built, extra_config={"leakage": {"max_fraction": 0.5}})
    assert jobs == {"leakage": 1, "report_leakage": 1, "all": 1}  # the join alone: no scan
    jobs = planned_jobs(built, extra_config={"leakage": {"top_units": 4}})
    assert jobs == {"certificate": 1, "leakage_space": 1, "leakage": 1, "report_leakage": 1, "all": 1}


def test_curation_keys_rerun_curation_and_its_readers_never_a_build(built, tmp_path):
    """A curation setting re-runs curate, the apply jobs, the certificate and the readers, never a build
    (no source is read again); read_margin alone re-runs the pretrain builds."""
    after_curate = {**CURATION, **READS_TOKEN_CACHES, "all": 1}
    assert planned_jobs(built, extra_config={"dedup": {"jaccard_threshold": 0.9}}) == after_curate
    assert planned_jobs(built, extra_config={"dedup": {"source_priority": ["roam"]}}) == after_curate
    assert planned_jobs(built, extra_config={"decontamination": {"min_piece_tokens": 20}}) == after_curate
    bench = tmp_path / "eval.txt"
    bench.write_text("an evaluation text\n")
    jobs = planned_jobs(built, extra_config={"decontamination": {"benchmarks": [str(bench)]}})
    assert jobs == after_curate
    assert planned_jobs(built, extra_config={"dedup": {"read_margin": 0.3}}) == {"pretrain": 4, **after_curate}


def test_demo_build_is_certified_and_records_what_curation_removed(built):
    cache = built / "cache"
    certificate = json.loads((cache / "report" / "certificate.json").read_text())
    assert certificate["holds"] and certificate["pairs"] and {p["shared_ngrams"] for p in certificate["pairs"]} == {0}
    assert len(certificate["train_splits"]) == 7  # 4 pretrain + 3 SFT
    leakage = json.loads((cache / "report" / "leakage.json").read_text())
    token_vals = [v for v in leakage["val_splits"] if v["space"] == "tokens"]
    # what the audit still finds is boilerplate curation waived (more than max_ngram_units units hold it)
    assert certificate["curation"]["waived_ngrams"] > 0
    shares = {v["name"]: v["fraction_any"] for v in token_vals}
    assert shares and all(f < 0.15 for f in shares.values()), shares  # the residue: waived boilerplate
    summary = json.loads((cache / "curation" / "summary.json").read_text())
    assert summary == certificate["curation"]
    for name, splits in summary["caches"].items():
        family, source = name.split("/")[:2]
        meta = json.loads((cache / family / source / "meta.json").read_text())
        if meta.get("built") is False:
            continue
        assert meta["curation"]["splits"]["train"]["counts"] == splits["train"]["counts"]
        assert meta["train_tokens"] == splits["train"]["kept_tokens"]


def test_editing_the_primer_reruns_only_primer_sft_and_its_readers(copy_of_built):
    path = copy_of_built / "data" / "primer.jsonl"
    path.write_text(path.read_text().replace('"content": "', '"content": "Edited. ', 1))
    assert planned_jobs(copy_of_built) == {"sft": 1, **READS_SFT}


def test_editing_a_note_snakemake_cannot_name_reruns_its_jobs(copy_of_built):
    # "{curly}" in a path would be a wildcard: the note is tracked through a param (size, mtime) instead
    note = copy_of_built / "notes" / "It's {curly} [square] $dollar.md"
    original, stat = note.read_bytes(), note.stat()
    note.write_bytes(original + b"- an edit\n")
    assert planned_jobs(copy_of_built) == {"pretrain": 1, "streams": 1, **READS_PRETRAIN, **READS_STREAMS}
    note.write_bytes(original)
    os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert planned_jobs(copy_of_built) == {}


def test_deleted_artifact_is_rebuilt_by_cache_all(copy_of_built):
    victim = copy_of_built / "cache" / "sft" / "dolly15k" / "val_idx.npy"
    want = victim.read_bytes()
    victim.unlink()
    readers = {"certificate": 1, "report_sft": 1, "report_tokenizer": 1, **AUDIT, "all": 1}
    assert planned_jobs(copy_of_built) == {"curate_sft": 1, **readers}  # only its apply job: curation is not redone
    snakemake(copy_of_built, "-j2", "cache/all")
    assert victim.read_bytes() == want


def test_report_html_is_produced_offline_right_after_cache_all(copy_of_built):
    """`snakemake --report cache/report.html` (no target: cache/all's DAG) embeds every figure, offline."""
    proc = snakemake(copy_of_built, "--report", "cache/report.html")
    page = (copy_of_built / "cache" / "report.html").read_text()
    figures = [name for names in layout.REPORT_FIGURES.values() for name in names]
    for name in figures:
        assert f"Adding {name} " in proc.stderr + proc.stdout
        if name.endswith(".svg"):
            root = ET.parse(copy_of_built / "cache" / "report" / name).getroot()
            assert root.tag == "{http://www.w3.org/2000/svg}svg", name
    assert "Adding curation_table.html " in proc.stderr + proc.stdout
    for category in ("Tokenizer", "Pretrain", "SFT", "Streams", "Leakage", "Curation"):
        assert f'"{category}"' in page
    assert page.count('"caption": "<p>') == len(figures) + 1  # every figure (and the curation table) captioned
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)\s*=\s*["']?https?://""", page)  # nothing fetched


def test_a_configuration_with_an_empty_val_split_fails_with_the_message(copy_of_built, built):
    built_gutenberg = built / "cache" / "pretrain" / "gutenberg"
    # few long books and a small val_doc_prob: no book goes to val
    proc = snakemake(
        copy_of_built,
        "-j1",
        "cache/pretrain/gutenberg/meta.json",
        extra_config={"sources": {"gutenberg": {"val_doc_prob": 0.01}}},
        check=False,
    )
    assert proc.returncode == 1
    error = (
        "error: gutenberg: the val split would hold 0 tokens (documents read: 4, blank: 0; split by "
        "sources.gutenberg.val_doc_prob=0.01). To fix: raise sources.gutenberg.val_doc_prob so val gets documents, "
        "or set sources.gutenberg.max_val_tokens: 0 to build without val on purpose"
    )
    log = (copy_of_built / "cache" / "logs" / "pretrain" / "gutenberg.log").read_text()
    assert error in log and proc.stderr.strip().splitlines()[-1] == f"  {error}"  # the last line printed
    gutenberg = copy_of_built / "cache" / "pretrain" / "gutenberg"
    assert not list(gutenberg.rglob("*.tmp"))  # nothing half-made; the cache built before is back
    assert artifact_hashes(gutenberg) == artifact_hashes(built_gutenberg)


def dry_run_jobs(out: str) -> dict[str, int]:
    table = out.split("Job stats:")[1].split("Reasons:")[0]
    return {
        m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M) if m.group(1) != "total"
    }


def test_one_target_plans_only_what_it_needs(tmp_path):
    fresh = make_workdir(tmp_path / "fresh")
    jobs = dry_run_jobs(snakemake(fresh, "-n", "cache/sft/primer/meta.json").stdout)
    # a curated cache needs the global decision, so every raw build (curation compares all sources); no report
    assert jobs == {"tokenizer": 1, "pretrain": 4, "sft": 3, "curate": 1, "curate_sft": 1}


def test_config_typo_stops_before_anything_runs(tmp_path):
    fresh = make_workdir(tmp_path / "typo")
    proc = subprocess.run(
        [*SNAKEMAKE, "-n", "cache/all", "--config", "tokenzier={vocab_size: 10}"],
        cwd=fresh,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "unknown key 'tokenzier' (did you mean 'tokenizer'?)" in proc.stdout + proc.stderr


def test_readme_demo_config_string_is_accepted(tmp_path):
    # `--config demo=true` arrives as the string 'true' in Snakemake 9; it must still validate
    fresh = make_workdir(tmp_path / "demo")
    out = snakemake(
        fresh, "-n", "-p", "elsewhere/all", "--quiet", "host", "--config", "demo=true", "seed=7", "cache_dir=elsewhere"
    ).stdout
    assert '"demo":true' in out and '"seed":7' in out
    # cache_dir places every output: the flag is elsewhere/all, the tokenizer job writes elsewhere/tokenizer
    assert "--out-dir $(dirname elsewhere/tokenizer/spm.model)" in out and not re.search(r"(?<![\w/])cache/", out)


def test_num_parts_splits_only_the_enabled_stream_sources(tmp_path):
    fresh = make_workdir(tmp_path / "parts")
    out = snakemake(fresh, "-n", "-p", "cache/all", "--quiet", "host", "--config", "pretrain={num_parts: 2}").stdout
    jobs = dry_run_jobs(out)
    assert (jobs["pretrain_part"], jobs["pretrain_merge"], jobs["pretrain"]) == (4, 2, 2)  # SMALL enables gutenberg
    parts = set(re.findall(r"wildcards: source=(\w+), part=(part_\d+)", out))
    assert parts == {(s, p) for s in ("fineweb_edu", "gutenberg") for p in ("part_000", "part_001")}
    assert "merge-pretrain --source fineweb_edu --out-dir $(dirname cache/pretrain/fineweb_edu/meta.json)" in out
    assert "build-pretrain --source gutenberg --part 1 --tokenizer" in out
    jobs = planned_jobs(fresh, "--config", "pretrain={num_parts: 3}", "sources={gutenberg: {enabled: false}}")
    assert (jobs["pretrain_part"], jobs["pretrain_merge"], jobs["pretrain"]) == (3, 1, 3)  # a disabled source: one job


def test_num_parts_builds_parts_merges_them_and_refuses_a_mismatched_part(copy_of_built, tmp_path, capsys):
    """pretrain.num_parts: 2 for real: both streamed sources (two data files each) as two part jobs and a
    merge that writes a manifest, the merged caches verify, and build-all writes the same bytes; a part
    rebuilt reruns the merge; a part of another source is refused by the merge."""
    from niels_gpt.cache.cli import main
    from niels_gpt.command_line import run_cli

    wf, parts = copy_of_built, {"pretrain": {"num_parts": 2}}
    targets = [f"cache/pretrain/{source}/meta.json" for source in ("fineweb_edu", "gutenberg")]
    snakemake(wf, "-j2", *targets, extra_config=parts)
    assert "Nothing to be done" in snakemake(wf, "-n", *targets, extra_config=parts).stdout
    cache = wf / "cache"
    for source in ("fineweb_edu", "gutenberg"):
        meta = json.loads((cache / "pretrain" / source / "meta.json").read_text())
        part_metas = [
            json.loads((cache / "pretrain" / source / "parts" / p / "meta.json").read_text())
            for p in ("part_000", "part_001")
        ]
        assert meta["num_parts"] == 2 and [p["index"] for p in meta["parts"]] == [0, 1]
        assert [len(m["provenance"]["stream"]["part_data_files"]) for m in part_metas] == [1, 1]  # one file each
        for split in ("train", "val"):
            assert meta[f"{split}_tokens"] == sum(m[f"{split}_tokens"] for m in part_metas) > 0
        # each part curated back to its budget exactly, or short by the shortfall its meta records, or its
        # stream ran out before the margin (gutenberg's one book per part: then train_tokens < the budget)
        for m in part_metas:
            rec = m["curation"]["splits"]["train"]
            exact = m["train_tokens"] + rec["shortfall_tokens"] == m["max_train_tokens"]
            assert exact or rec["read_tokens"] < rec["read_budget"], rec
        if source == "fineweb_edu":
            assert meta["train_tokens"] == SMALL["sources"][source]["max_train_tokens"]
        # the merge wrote the manifest and nothing else: the parts' shards, listed relative to the source
        assert sorted(p.name for p in (cache / "pretrain" / source).iterdir()) == ["meta.json", "parts"]
        assert {e["path"].split("/")[1] for s in ("train", "val") for e in meta["shards"][s]} == {
            "part_000",
            "part_001",
        }
    assert all(status == "ok" for _, status, _ in verify_all(cache)), verify_all(cache)
    # build-all, the same config in one process: the same parts, curation files and manifests
    build_all_like_workflow(wf, tmp_path / "build_all", parts)
    trees = [("curation", "summary.json"), ("curation", "waived_ngrams.npy"), ("curation", "decisions", "sft")]
    trees += [("curation", "decisions", "pretrain", f"{source}.json") for source in ("wikitext", "roam")]
    for source in ("fineweb_edu", "gutenberg"):  # (decisions/pretrain/{source}.json: the num_parts=1 build's)
        trees += [("curation", "decisions", "pretrain", source), ("curation", "raw", "pretrain", source, "parts")]
        trees += [("pretrain", source)]
    ours, differ = differing(tmp_path / "build_all", cache, trees)
    assert len(ours) > 30 and differ == [], "\n".join(differ)
    capsys.readouterr()

    # a part rebuilt: its outputs are the merge's inputs, so the merge (and only it) runs again
    snakemake(wf, "-j1", "-f", "cache/pretrain/fineweb_edu/parts/part_001/meta.json", extra_config=parts)
    planned = snakemake(wf, "-n", *targets, extra_config=parts).stdout
    assert re.search(r"^pretrain_merge\s+1$", planned, re.M) and "pretrain_part " not in planned, planned
    snakemake(wf, "-j1", *targets, extra_config=parts)
    assert "Nothing to be done" in snakemake(wf, "-n", *targets, extra_config=parts).stdout

    # gutenberg's part 1 copied over fineweb_edu's (a folder mix-up between sources): the merge refuses it
    fineweb = cache / "pretrain" / "fineweb_edu"
    merged = (fineweb / "meta.json").read_bytes()
    shutil.rmtree(fineweb / "parts" / "part_001")
    shutil.copytree(cache / "pretrain" / "gutenberg" / "parts" / "part_001", fineweb / "parts" / "part_001")
    spec = json.dumps({"pretrain": {"shard_bytes": SMALL["pretrain"]["shard_bytes"], "num_parts": 2}})
    capsys.readouterr()
    assert run_cli(main, ["merge-pretrain", "--source", "fineweb_edu", "--out-dir", str(fineweb), "--spec", spec]) == 1
    err = capsys.readouterr().err  # milestones, then the one error line
    assert err.endswith(
        f"\nerror: {fineweb}/parts/part_001/meta.json: a part of source 'gutenberg', not 'fineweb_edu'\n"
    )
    assert err.count("error:") == 1
    assert (fineweb / "meta.json").read_bytes() == merged  # the merged cache untouched


def _val(result: dict, name: str) -> dict:
    return next(v for v in result["val_splits"] if v["name"] == name)


def test_roam_edits_rebuild_only_roam_and_curation_removes_a_planted_val_copy(copy_of_built):
    """Edit one roam note and copy the longest wikitext val article into a new note (train side): only
    roam's build, curation and the report jobs re-run; curation removes the copy (a near duplicate of a val
    document), so the audit finds no pretrain leak; the byte streams (not curated) still hold it: the audit
    names it there, far above the demo's own overlap, and a gate below its share fails the run."""
    from niels_gpt.data.roam import list_roam_paths, split_roam_paths
    from niels_gpt.tokenizer import SentencePieceTokenizer

    wf = copy_of_built
    cache = wf / "cache"
    baseline = json.loads((cache / "report" / "leakage.json").read_text())
    tok = SentencePieceTokenizer(cache / "tokenizer" / "spm.model")
    val = np.concatenate([np.fromfile(p, dtype="<u2") for p in sorted((cache / "pretrain/wikitext/val").glob("*.bin"))])
    docs = np.split(val, np.flatnonzero(val == tok.eot_id) + 1)
    longest = max(range(len(docs)), key=lambda i: len(docs[i]))
    article = tok.decode(docs[longest])
    notes = wf / "notes"
    with open(sorted(notes.rglob("*.md"))[0], "a") as f:
        f.write("\n- an edit\n")
    for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":  # a name (sorted position) the seeded split puts into train
        planted = notes / f"{letter} planted article.md"
        planted.write_text(article)
        train, _ = split_roam_paths(list_roam_paths(notes), 0.1, 42)
        if str(planted) in train:
            break
        planted.unlink()
    else:
        pytest.fail("no note name lands in the roam train split")
    dry = snakemake(wf, "-n", "-p", "cache/all", "--quiet", "host").stdout  # each job block (the profile hides it)
    builds = [b for b in re.split(r"\n(?=(?:local)?rule )", dry) if re.match(r"rule (pretrain|sft|streams):", b)]
    assert {m for b in builds for m in re.findall(r"wildcards: source=(\w+)", b)} == {"roam"}  # only roam is read
    assert dry_run_jobs(dry) == {"pretrain": 1, "streams": 1, **READS_PRETRAIN, **READS_STREAMS}
    snakemake(wf, "-j2", "cache/all")
    assert planned_jobs(wf) == {}

    result = json.loads((cache / "report" / "leakage.json").read_text())
    assert _val(result, "pretrain/wikitext")["fraction"]["pretrain/roam"] < 0.01  # waived boilerplate at most
    roam = json.loads((cache / "pretrain" / "roam" / "meta.json").read_text())["curation"]["splits"]["train"]
    assert sum(roam["counts"].get(r, {}).get("units", 0) for r in ("exact_duplicate", "near_duplicate")) == 1
    assert json.loads((cache / "report" / "certificate.json").read_text())["holds"]
    stream, stream_before = _val(result, "streams/wiki"), _val(baseline, "streams/wiki")
    assert stream["fraction"]["streams/roam"] > 10 * max(stream_before["fraction"]["streams/roam"], 1e-3)

    limit = round(stream["fraction"]["streams/roam"] * 0.9, 4)
    audit = (cache / "report" / "leakage.json").read_bytes()
    proc = snakemake(
        wf, "-j1", "cache/report/leakage.json", extra_config={"leakage": {"max_fraction": limit}}, check=False
    )
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith("  error: leakage gate: ")
    assert (cache / "report" / "leakage.json").read_bytes() == audit  # the gate failed the job: the last audit kept
    log = (cache / "logs" / "report" / "leakage.log").read_text()
    assert "error: leakage gate: " in log and f"leakage.max_fraction = {100 * limit:g}%" in log
    assert "streams/wiki val in streams/roam train" in log


# A failed rebuild never costs the good cache it replaces (niels_gpt/keep.py, rules/hooks.smk).


def kept_as_before(workdir: Path, before: dict[str, str], proc: subprocess.CompletedProcess) -> None:
    """Every artifact byte-identical to `before`, verify all ok, nothing left in .previous/."""
    cache = workdir / "cache"
    assert artifact_hashes(cache) == before, proc.stderr[-3000:]
    assert all(status == "ok" for _, status, _ in verify_all(cache))
    assert not (cache / ".previous").exists()


def test_a_value_the_tokenizer_job_refuses_keeps_the_previous_tokenizer(copy_of_built):
    before = artifact_hashes(copy_of_built / "cache")
    too_many = {"tokenizer": {"vocab_size": 60_000}}  # fits uint16, but not the sample: only the job can tell
    proc = snakemake(copy_of_built, "-j2", "cache/all", extra_config=too_many, check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("  error: tokenizer.vocab_size=60,000 is more than the training sample supports")
    assert "tokenizer failed; kept the previous cache/tokenizer/ (2 outputs): it is there as before the run" in lines
    kept_as_before(copy_of_built, before, proc)
    # Snakemake's record of the tokenizer came back with it: the next run tries the value again, the old one
    # has nothing to do
    assert planned_jobs(copy_of_built, extra_config=too_many).get("tokenizer") == 1
    assert planned_jobs(copy_of_built) == {}


def test_a_bad_primer_line_keeps_the_previous_primer_cache_and_ends_the_output(copy_of_built):
    primer = copy_of_built / "data" / "primer.jsonl"
    good = primer.read_bytes()
    primer.write_bytes(good + b'{"messages": "not a list"}\n')
    before = artifact_hashes(copy_of_built / "cache")
    proc = snakemake(copy_of_built, "--nocolor", "cache/sft/primer/meta.json", check=False)  # as written: no -j
    assert proc.returncode == 1
    line = good.count(b"\n") + 1
    assert (
        proc.stderr.strip().splitlines()[-1] == f"  error: data/primer.jsonl:{line}: 'messages' must be a list, got str"
    )
    kept_as_before(copy_of_built, before, proc)
    assert planned_jobs(copy_of_built) == {"sft": 1, **READS_SFT}  # the file is still bad: the next run tries again
    primer.write_bytes(good)
    assert planned_jobs(copy_of_built) == {}  # the cache is the one built from this file


def test_a_killed_tokenizer_job_keeps_the_previous_tokenizer(copy_of_built):
    import signal
    import time

    import psutil

    before = artifact_hashes(copy_of_built / "cache")
    cmd = [*SNAKEMAKE, "-j2", "-R", "tokenizer", "cache/all", "--configfile", "config.yaml", "overrides.yaml"]
    env = {**os.environ, **OFFLINE, "HF_HOME": str(copy_of_built / ".hf")}
    run = subprocess.Popen(cmd, cwd=copy_of_built, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job, deadline = None, time.monotonic() + 120
        while job is None and time.monotonic() < deadline and run.poll() is None:
            for child in psutil.Process(run.pid).children(recursive=True):
                try:
                    if "build-tokenizer" in child.cmdline() and child.name().startswith("python"):
                        job = child
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.05)
        assert job is not None, "the tokenizer job never started"
        time.sleep(1.0)  # mid-way: sampling or training
        job.send_signal(signal.SIGKILL)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    proc = subprocess.CompletedProcess(cmd, run.returncode, out, err)
    assert run.returncode == 1, err[-3000:]
    assert "tokenizer failed; kept the previous cache/tokenizer/ (2 outputs)" in err
    kept_as_before(copy_of_built, before, proc)
    assert planned_jobs(copy_of_built) == {}  # the forced rerun never finished: the tokenizer is the one it had


def test_a_build_prints_its_jobs_and_one_result_line_each_not_their_settings(copy_of_built):
    (copy_of_built / "cache" / "sft" / "primer" / "meta.json").unlink()
    proc = snakemake(copy_of_built, "-j2", "cache/all")
    out = proc.stdout + proc.stderr
    assert "niels_gpt: built" in out
    line = r"^  curate_sft \(source=primer\): train \d+ examples, val \d+ examples; train [\d,]+ tokens"
    assert re.search(line, out, re.M)
    assert '"seed"' not in out and max(len(line) for line in out.splitlines()) < 200  # the settings stay in the logs


def test_demo_and_real_builds_have_their_own_cache_folders(tmp_path):
    fresh = make_workdir(tmp_path / "both")
    overrides = json.loads((fresh / "overrides.yaml").read_text())
    del overrides["cache_dir"]  # the defaults, as in config.yaml
    (fresh / "overrides.yaml").write_text(json.dumps(overrides))

    def planned_outputs(*args):
        out = snakemake(fresh, "-n", "--quiet", "host", *args).stdout
        return set(re.findall(r"^    output: (.*)$", out, re.M))

    demo = ", ".join(planned_outputs("--config", "demo=true")).split(", ")
    real = ", ".join(planned_outputs("--config", "demo=false")).split(", ")
    assert demo and all(p.startswith("cache-demo/") for p in demo), demo
    assert real and all(p.startswith("cache/") for p in real), real
    wrong = snakemake(fresh, "-n", "cache/all", "--config", "demo=true", check=False)
    assert wrong.returncode == 1
    assert "cache/all: with demo=true the caches live in cache-demo/, not cache/" in wrong.stdout + wrong.stderr


def test_a_mixture_on_the_command_line_replaces_the_files_mixture(built):
    # config.yaml's mix has dolly15k 0.2: merged key by key this would sum to 1.2 and be refused
    jobs = planned_jobs(built, "--config", "sft={mix: {primer: 0.3, oasst1: 0.7}}")
    assert jobs == {"report_sft": 1, "all": 1}


def test_a_vocabulary_beyond_uint16_is_refused_by_a_dry_run(built):
    proc = snakemake(built, "-n", "cache/all", "--config", "tokenizer={vocab_size: 70000}", check=False)
    assert proc.returncode == 1
    assert "key 'tokenizer.vocab_size': 70000 is greater than the maximum of 65532" in proc.stdout + proc.stderr


def test_verify_names_a_deleted_shard_and_its_fix_rebuilds_it(copy_of_built):
    """The fix verify prints is a command that works as printed (a shard sits inside a folder output, which
    `snakemake cache/all` does not look into)."""
    shard = copy_of_built / "cache" / "pretrain" / "wikitext" / "train" / "shard_00001.bin"
    want = shard.read_bytes()
    shard.unlink()
    verify = subprocess.run(
        [sys.executable, "-m", "niels_gpt.cache.cli", "verify", "cache"],
        cwd=copy_of_built,
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 1
    fix = [ln.split("fix: ", 1)[1] for ln in verify.stdout.splitlines() if "fix: " in ln]
    assert fix == ["snakemake -f cache/pretrain/wikitext/meta.json"], verify.stdout
    command = fix[0].split()
    snakemake(copy_of_built, "--nocolor", *command[1:])  # as printed (the test's config files come first)
    assert shard.read_bytes() == want
    assert all(status == "ok" for _, status, _ in verify_all(copy_of_built / "cache"))
