"""The DAG without demo: `snakemake cache/all` reading every corpus from the test hub (tests/support/hub).

One build, shared by the tests below: the default config with small budgets, gutenberg switched to
the raw `manu/project_gutenberg` by README's own `--config` line, every hub source read through the real
`datasets.load_dataset(id, config, ...)` path against a loopback hub that serves each repository in
its real layout. The hub is stopped once the build is done. The checks: every cache verifies, every
cache built from hub data records the dataset and the commit it read, streamed sources were streamed
(range reads only), a dry run asks the hub nothing, a revision pinned to the commit builds the same
bytes, a dataset, config, split or revision the repository lacks fails the job with one line naming it
and what the repository has, a hub that stays down fails the Snakemake job with one line in its log,
half-made files removed and the previous good cache kept (the rerun with the hub back builds the same
bytes), and, offline (HF_HUB_OFFLINE=1, the hub gone), the prepared sources rebuild from the local
cache while the streamed ones fail with the offline message.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from tests.support.hub import HubServer, faults, hub_env
from tests.workflow.test_workflow import ROOT, copy_workflow

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
FINEWEB, WIKITEXT, RAW_GUTENBERG = "HuggingFaceFW/fineweb-edu", "Salesforce/wikitext", "manu/project_gutenberg"
DOLLY, OASST1 = "databricks/databricks-dolly-15k", "OpenAssistant/oasst1"
HUB_READS = {  # cache -> the repository it reads
    "pretrain/fineweb_edu": FINEWEB,
    "pretrain/wikitext": WIKITEXT,
    "pretrain/gutenberg": RAW_GUTENBERG,
    "sft/dolly15k": DOLLY,
    "sft/oasst1": OASST1,
}
# Small budgets: the default config's every other value, the hub's real layouts.
SMALL = {
    "demo": False,
    "tokenizer": {"vocab_size": 500, "sample_chars": 200_000},
    "sources": {
        "fineweb_edu": {"max_train_tokens": 20_000, "max_val_tokens": 2_000, "val_doc_prob": 0.2, "shuffle_buffer": 50},
        "wikitext": {"max_train_tokens": 20_000},
        "gutenberg": {"max_train_tokens": 5_000, "max_val_tokens": 500, "val_doc_prob": 0.5, "shuffle_buffer": 0},
        "roam": {"root": "notes"},
    },
    "pretrain": {"shard_bytes": 40_000},
    "sft": {"t_max": 256},
}


def readme_gutenberg_config() -> str:
    """The `--config` value README gives for reading the raw Gutenberg books from the hub."""
    found = re.search(r"--config '(sources=\{gutenberg: \{[^']*manu/project_gutenberg[^']*split: en\}\})'", readme())
    assert found, "README.md lost its --config line for manu/project_gutenberg"
    return found.group(1)


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def snakemake(workdir: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    cmd = [*SNAKEMAKE, "--configfile", "config.yaml", "overrides.yaml", *args]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        logs = "".join(f"\n--- {p}\n{p.read_text()[-3000:]}" for p in (workdir / "cache" / "logs").rglob("*.log"))
        pytest.fail(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-5000:]}{logs}")
    return proc


class Build:
    """The shared build: its folder, the environment it ran in, the hub's request log and commits."""

    def __init__(self, workdir: Path, env: dict, requests: list, shas: dict, seconds: float):
        self.workdir, self.cache, self.env = workdir, workdir / "cache", env
        self.requests, self.shas, self.seconds = requests, shas, seconds

    def meta(self, rel: str) -> dict:
        return json.loads((self.cache / rel).read_text())


@pytest.fixture(scope="module")
def build(tmp_path_factory, hub_root) -> Build:
    workdir = copy_workflow(tmp_path_factory.mktemp("hub_wf") / "wf", SMALL)
    with HubServer(hub_root[0]) as server:
        env = hub_env(server, workdir / ".hf")
        started = time.monotonic()
        snakemake(workdir, env, "-j2", "cache/all", "--config", readme_gutenberg_config())
        seconds = time.monotonic() - started
        shas = {repo: server.sha(repo) for repo in server.repos}
    return Build(workdir, env, server.requests.snapshot(), shas, seconds)


def test_every_cache_builds_from_the_hub_and_verifies(build):
    from niels_gpt.inspection.verify import verify

    _, checks, stray = verify(build.cache)
    assert stray == [] and len(checks) == 1 + 4 + 3 + 6
    assert all(c.status == "ok" for c in checks), [(c.artifact.name, c.status, c.problems) for c in checks]
    for rel in ("pretrain/fineweb_edu", "pretrain/wikitext", "pretrain/gutenberg"):
        meta = build.meta(f"{rel}/meta.json")
        assert meta["train_tokens"] > 0 and meta["val_tokens"] > 0 and not meta["provenance"]["demo"], rel
    print(f"cache/all against the test hub: {build.seconds:.1f} s")


def test_every_cache_built_from_hub_data_records_the_dataset_and_the_commit(build):
    for rel, repo in HUB_READS.items():
        meta = build.meta(f"{rel}/meta.json")
        assert meta["dataset_name"] == repo, rel
        assert meta["dataset_revision"] == build.shas[repo], rel
    for split in ("train", "val"):
        stream = build.meta(f"streams/wiki_{split}.meta.json")
        assert (stream["dataset_name"], stream["dataset_revision"]) == (WIKITEXT, build.shas[WIKITEXT])
    trained_on = build.meta("tokenizer/meta.json")["trained_on"]["sources"]
    for source, repo in (("fineweb_edu", FINEWEB), ("wikitext", WIKITEXT), ("gutenberg", RAW_GUTENBERG)):
        assert (trained_on[source]["read"]["dataset_id"], trained_on[source]["read"]["revision"]) == (
            repo,
            build.shas[repo],
        )


def test_streamed_sources_are_read_by_ranges_and_prepared_ones_downloaded(build):
    def data_gets(repo: str) -> set:
        return {
            r.status
            for r in build.requests
            if r.method == "GET" and f"/{repo}/resolve/" in r.path and "README" not in r.path
        }

    assert data_gets(FINEWEB) == data_gets(RAW_GUTENBERG) == {206}  # never a whole file
    assert data_gets(WIKITEXT) == data_gets(DOLLY) == data_gets(OASST1) == {200}
    for rel in ("pretrain/fineweb_edu", "pretrain/gutenberg"):
        assert build.meta(f"{rel}/meta.json")["streaming"] is True
    assert build.meta("pretrain/wikitext/meta.json")["streaming"] is False
    assert all(r.status in (200, 206, 404) for r in build.requests)  # 404: the optional files datasets probes


def test_a_dry_run_asks_the_hub_nothing(build, hub_root):
    with HubServer(hub_root[0]) as server:
        started = time.monotonic()
        out = snakemake(
            build.workdir,
            hub_env(server, build.workdir / ".hf"),
            "-n",
            "cache/all",
            "--config",
            readme_gutenberg_config(),
        )
        assert "Nothing to be done" in out.stdout + out.stderr
        assert len(server.requests) == 0 and time.monotonic() - started < 30


def cli(capsys, *args: str) -> tuple[int, str]:
    """(exit code, stderr) of one cache CLI command, run in this process against the session hub."""
    code = run_cli(main, list(args))
    return code, capsys.readouterr().err


def spec(**sources) -> str:
    merged = json.loads(json.dumps(SMALL))
    for name, values in sources.items():
        merged["sources"].setdefault(name, {}).update(values)
    return json.dumps(merged)


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize(
    "family, source, rel, files",
    [
        ("build-sft", "dolly15k", "sft/dolly15k", ["train_tokens.bin", "val_tokens.bin", "train_idx.npy"]),
        ("build-pretrain", "fineweb_edu", "pretrain/fineweb_edu", ["train/shard_00000.bin", "val/shard_00000.bin"]),
    ],
)
def test_a_revision_pinned_to_the_commit_builds_the_same_cache(
    build, hub, capsys, tmp_path, family, source, rel, files
):
    repo = HUB_READS[rel]
    pinned = spec(**{source: {"revision": hub.sha(repo)}})
    tokenizer = build.cache / "tokenizer" / "spm.model"
    margin = (
        ["--read-margin", "0.1"] if family == "build-pretrain" else []
    )  # what the raw build reads (dedup.read_margin)
    code, err = cli(
        capsys,
        family,
        "--source",
        source,
        "--tokenizer",
        str(tokenizer),
        "--out-dir",
        str(tmp_path),
        "--spec",
        pinned,
        *margin,
    )
    assert code == 0, err
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["provenance"]["revision_requested"] == hub.sha(repo) == build.shas[repo]
    for name in files:  # the workflow's raw cache (cache/curation/raw/), before curation
        assert (tmp_path / name).read_bytes() == (build.cache / "curation" / "raw" / rel / name).read_bytes(), name


WRONG = {  # (command, source, config change) -> what the one error line says
    "dataset id": (
        ("build-sft", "dolly15k", {"dataset_id": "databricks/databricks-dolly-15k-typo"}),
        r"error: hub dataset 'databricks/databricks-dolly-15k-typo' does not exist on http://127\.0\.0\.1:\d+ "
        r"or cannot be accessed; check the source's `dataset_id:` in config\.yaml",
    ),
    "config": (
        ("build-pretrain", "fineweb_edu", {"config": "CC-MAIN-1999-01"}),
        r"error: hub dataset 'HuggingFaceFW/fineweb-edu' config 'CC-MAIN-1999-01' does not exist; "
        r"its configs: default, CC-MAIN-2024-10, CC-MAIN-2024-18\. Set the source's `config:` in config\.yaml",
    ),
    "split": (
        ("build-pretrain", "gutenberg", {"enabled": True, "dataset_id": RAW_GUTENBERG, "split": "train"}),
        r"error: hub dataset 'manu/project_gutenberg' has no split 'train'; its splits: en, de, fr\. ",
    ),
    "revision": (
        ("build-sft", "oasst1", {"revision": "v9.9"}),
        r"error: hub dataset 'OpenAssistant/oasst1' has no revision 'v9\.9' \(a branch, tag or commit sha\); "
        r"its default branch is at commit (?P<sha>[0-9a-f]{40}): pin it with `revision: (?P=sha)` in the "
        r"source's section of config\.yaml, or set `revision: null` to read the default branch",
    ),
}


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_a_dataset_config_split_or_revision_the_hub_lacks_fails_with_one_line(build, hub, capsys, tmp_path, wrong):
    (family, source, change), message = WRONG[wrong]
    tokenizer = str(build.cache / "tokenizer" / "spm.model")
    code, err = cli(
        capsys,
        family,
        "--source",
        source,
        "--tokenizer",
        tokenizer,
        "--out-dir",
        str(tmp_path),
        "--spec",
        spec(**{source: change}),
    )
    last = err.strip().splitlines()[-1]
    assert code == 1 and re.fullmatch(message + ".*", last), last
    assert "Traceback" not in err and not (tmp_path / "meta.json").exists()


def test_a_hub_that_stays_down_fails_the_snakemake_job_with_one_line_and_the_rerun_builds_the_same_cache(
    build, hub_root, tmp_path
):
    """The job as Snakemake runs it: the fineweb-edu revision info answers 503 for every try (nobody
    retries it but us, made short here), so the job fails with one line in its log and the previous cache
    is kept; with the hub back the same command builds the cache the shared build built."""
    workdir = tmp_path / "wf"
    shutil.copytree(build.workdir, workdir, symlinks=True)
    overrides = json.loads((workdir / "overrides.yaml").read_text())
    overrides["hub"] = {"attempts": 2, "backoff_s": 0.01, "max_backoff_s": 0.01}  # never changes what is built
    (workdir / "overrides.yaml").write_text(json.dumps(overrides))
    rel = "pretrain/fineweb_edu"
    target = ["-j1", f"cache/{rel}/meta.json", "--config", readme_gutenberg_config()]  # the shared build's config
    revision_info = f"^/api/datasets/{FINEWEB}/revision/"  # asked on every load
    with HubServer(hub_root[0]) as server:
        env = hub_env(server, workdir / ".hf")
        down = server.faults.add(faults.status(revision_info, 503, count=10**6))
        cmd = [*SNAKEMAKE, "--configfile", "config.yaml", "overrides.yaml", *target, "--forcerun", "pretrain"]
        failed = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)
        log = (workdir / "cache" / "logs" / "pretrain" / "fineweb_edu.log").read_text()
        assert failed.returncode != 0, failed.stderr[-3000:]
        last = log.strip().splitlines()[-1]
        assert last.startswith(f"error: cannot reach hub dataset {FINEWEB!r}") and "503" in last, (
            log[-3000:] + failed.stderr[-3000:]
        )
        assert "Traceback" not in log and down.hits == 2  # hub.attempts tries, then the one line
        # nothing half-made, and the good raw cache the forced rebuild was replacing is back (niels_gpt/keep.py)
        assert not list((workdir / "cache" / "curation" / "raw" / rel).rglob("*.tmp"))
        kept = f"pretrain (source=fineweb_edu) failed; kept the previous cache/curation/raw/{rel}/ (3 outputs)"
        assert kept in failed.stderr and failed.stderr.strip().splitlines()[-1] == f"  {last}", failed.stderr[-3000:]
        for name in ("train/shard_00000.bin", "val/shard_00000.bin", "meta.json"):
            assert (workdir / "cache" / rel / name).read_bytes() == (build.cache / rel / name).read_bytes(), name

        server.faults.clear()
        snakemake(workdir, env, *target)  # the kept cache is the one Snakemake recorded: the same build again
    for name in ("train/shard_00000.bin", "val/shard_00000.bin", "meta.json"):
        assert (workdir / "cache" / rel / name).read_bytes() == (build.cache / rel / name).read_bytes(), name


def test_offline_the_prepared_sources_rebuild_from_the_cache_and_the_streamed_ones_say_why_not(build, tmp_path):
    """The hub is gone (the build stopped it) and HF_HUB_OFFLINE=1: one process runs five builds."""
    script = (
        "import contextlib, io, json, sys\n"
        "from niels_gpt.cache.cli import main\n"
        "from niels_gpt.command_line import run_cli\n"
        "out = []\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        out.append([run_cli(main, argv), err.getvalue()])\n"
        "print(json.dumps(out))\n"
    )
    tokenizer = str(build.cache / "tokenizer" / "spm.model")
    builds = [
        ("build-pretrain", "wikitext"),
        ("build-sft", "dolly15k"),
        ("build-sft", "oasst1"),
        ("build-pretrain", "fineweb_edu"),
        ("build-pretrain", "gutenberg"),
    ]
    config = spec(gutenberg={"enabled": True, "dataset_id": RAW_GUTENBERG, "split": "en"})
    argv = [  # as the workflow's raw builds (cache/curation/raw/): pretrain reads dedup.read_margin past its budgets
        [cmd, "--source", s, "--tokenizer", tokenizer, "--out-dir", str(tmp_path / s), "--spec", config]
        + (["--read-margin", "0.1"] if cmd == "build-pretrain" else [])
        for cmd, s in builds
    ]
    env = {**build.env, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(argv)],
        cwd=build.workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(zip((s for _, s in builds), json.loads(proc.stdout)))
    for source, rel, name in (
        ("wikitext", "pretrain/wikitext", "train/shard_00000.bin"),
        ("dolly15k", "sft/dolly15k", "train_tokens.bin"),
        ("oasst1", "sft/oasst1", "train_tokens.bin"),
    ):
        assert results[source][0] == 0, results[source][1]
        raw = build.cache / "curation" / "raw" / rel / name
        assert (tmp_path / source / name).read_bytes() == raw.read_bytes(), source
    for source, repo in (("fineweb_edu", FINEWEB), ("gutenberg", RAW_GUTENBERG)):
        code, err = results[source]
        last = err.strip().splitlines()[-1]
        assert code == 1 and last.startswith(f"error: cannot reach hub dataset '{repo}'"), err
        assert "OfflineModeIsEnabled" in last and "demo=true" in last and "Traceback" not in err
        assert not (tmp_path / source / "meta.json").exists()


def test_readme_lists_every_default_hub_dataset_with_what_the_hub_has():
    from niels_gpt.config import prepare_config
    from niels_gpt.data.registry import HUB_SOURCES

    section = readme().split("### The hub datasets", 1)[1].split("\n#", 1)[0]
    defaults = prepare_config({})["sources"]
    for source in HUB_SOURCES:
        s = defaults[source]
        row = next(
            (line for line in section.splitlines() if line.startswith(f"| {source} | `{s['dataset_id']}` |")), ""
        )
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert len(cells) == 5, f"README's hub table has no row for {source}"
        assert cells[2] == (f"`{s['config']}`" if s.get("config") else "none"), source
        assert cells[3].startswith(f"`{s.get('split') or s['train_split']}`") and cells[4], source
    assert "| gutenberg (alternative) | `manu/project_gutenberg` | none | `en` |" in section


def everyday_lines() -> list[str]:
    """The commands of README's "Everyday use" block, as written (comments dropped)."""
    block = readme().split("## Everyday use", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_every_everyday_line_of_the_readme_runs_as_written(build, hub_root, tmp_path):
    """Each line as a user types it (no --configfile, no -j added), in a checkout whose config.yaml holds
    the shared build's small settings: the real lines read the loopback hub, the demo line the sample."""
    import shlex

    import yaml

    from niels_gpt.config import deep_merge
    from tests.workflow.test_workflow import artifact_hashes

    workdir = Path(shutil.copytree(build.workdir, tmp_path / "wf", symlinks=True))
    (workdir / "data" / "sample").symlink_to(ROOT / "data" / "sample")
    gutenberg = yaml.safe_load(readme_gutenberg_config().split("=", 1)[1])
    gutenberg["gutenberg"]["demo_data_files"] = {"en": "data/sample/gutenberg_raw/*.parquet"}  # its split for the demo
    config = deep_merge(deep_merge(yaml.safe_load((ROOT / "config.yaml").read_text()), SMALL), {"sources": gutenberg})
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    (workdir / "cache" / "sft" / "primer" / "meta.json").unlink()  # the one-artifact line has work to do
    real_before = artifact_hashes(workdir / "cache")
    lines = everyday_lines()
    assert any("demo=true" in line for line in lines) and any(line.startswith("snakemake -R") for line in lines)
    with HubServer(hub_root[0]) as server:
        env = hub_env(server, workdir / ".hf")
        for line in lines:
            words = shlex.split(line)
            head = SNAKEMAKE if words[0] == "snakemake" else [sys.executable] if words[0] == "python" else None
            assert head is not None, line
            proc = subprocess.run(
                [*head, *words[1:]], cwd=workdir, capture_output=True, text=True, env=env, timeout=600
            )
            assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            if "demo=true" in line:  # the demo has its own folder: the real caches are untouched
                assert (workdir / "cache-demo" / "all").exists()
                assert {k: v for k, v in artifact_hashes(workdir / "cache").items() if "primer" not in k} == {
                    k: v for k, v in real_before.items() if "primer" not in k
                }
    assert (workdir / "cache" / "report.html").exists() and (
        workdir / "cache" / "sft" / "primer" / "meta.json"
    ).exists()
