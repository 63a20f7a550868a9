"""The default run at full size against a loopback hub: per-rule wall times, the pretrain build against
the tokenizer's limit, peak RSS, disk, and HTTP bytes fetched against the bytes tokenized.

Data: `tests.support.hub.write_hub_repos` writes every repository the config names, in its real layout,
at `--scale` of full size (FULL below: fineweb-edu text for the default budgets of 200 M + 5 M tokens,
wikitext-103-sized splits, dolly-15k and oasst1-sized chat data) into `--out`/hub-<scale>/, once: a
later run with the same sizes reuses it. Roam notes: the bundled sample notes, copied to `.roam-data`.

Run: a fresh work folder (the repository's Snakefile, rules, profiles, config.yaml and data linked in),
a fresh HF_HOME, HF_ENDPOINT at the hub (`hub_env`), then `snakemake -j2 cache/all`: the default
config, no demo, default budgets (at a scale below 1 the fineweb budgets shrink with the data). A
sampler thread records the load average and the summed RSS of the whole process tree every second
(anonymous and file-backed apart: `Sampler`).
Reported: each rule's wall time, CPU time and peak RSS (Snakemake's benchmark files,
cache/benchmarks/), the run's wall time and summed peak RSS, disk used (the caches, HF_HOME, the hub's
files), and the HTTP requests and body bytes the hub sent per repository, against the bytes of the
rows the pretrain build tokenized.

Limit: the fineweb_edu rule's tokens per second (its train + val tokens over the rule's wall time)
against a `Pool(2)` that only counts tokens (benchmarks/encode_limit.py), run afterwards in this process
on the same text (the build's documents_seen rows, read from the parquet files in file order) with
the tokenizer the run trained. Then `compare` (benchmarks/encode_limit.py): `build_pretrain_cache`
in this process against the same pool, interleaved, medians, on the first `--compare-chars` of that
text (the harness of the build's before/after figures). With `--rule-rounds N` instead: the fineweb_edu
rule alone (its command from the run's Snakemake log, against the hub), as of now and as of `--before`
(that revision's package first on PYTHONPATH), and a fresh Pool(2) count's pass, interleaved over N
rounds: tokens/s, the ratio, peak RSS, HTTP bytes, and whether every round wrote the same shards.

    python -m benchmarks.bench_full_build [--scale 1.0] [--out benchmarks/out/full_build] \\
        [--rounds 5] [--compare-chars 100000000] [--skip-run] [--before REV] [--rule-rounds N] [--run-only] \\
        [--distinct-text]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.encode_limit import _pool_count, _pool_init, compare, descendants, with_workers_cpu
from niels_gpt.pretrain import encode as batch_encode
from niels_gpt.pretrain import writer as pretrain_writer
from niels_gpt.tokenizer import SentencePieceTokenizer
from tests.support.hub import HubServer, HubSizes, hub_env, write_hub_repos

REPO = Path(__file__).resolve().parents[1]
LINKED = ("Snakefile", "rules", "profiles", "config.yaml", "data")  # what a run needs of the repository
FINEWEB_REPO = "HuggingFaceFW/fineweb-edu"
# Full size. fineweb-edu: 12 files of 56,000 rows of ~1,710 chars (1.15 GB of text): the default budgets
# (205 M tokens) at up to 5.6 chars per token. wikitext-103: 2 train files of 60,000 articles of ~4,500
# chars (~540 MB, as the real train split), 60 articles in validation and test (as the real ones). dolly:
# 15,011 rows; oasst1: 10,000 train trees of ~7.6 messages (~76 k) and 1,000 validation trees.
FULL = HubSizes(
    fineweb_files=12,
    fineweb_rows=56_000,
    wikitext_articles=60_000,
    wikitext_eval_articles=60,
    dolly_rows=15_011,
    oasst1_trees=10_000,
    gutenberg_files=1,
    gutenberg_books=1,
)
DEFAULT_BUDGETS = (200_000_000, 5_000_000)  # sources.fineweb_edu.max_train_tokens / max_val_tokens
# The run's sampler: a walk of /proc (~300 processes) costs ~20 ms of CPU; 0.25 s catches peaks that last
# half a second (the byte streams' join, the tokenizer's training) for ~8 % of one core.
JOB_SAMPLE_S = 0.25


def scaled_sizes(scale: float) -> HubSizes:
    """FULL with every count of rows, articles and trees times `scale` (files kept, at least 1 row)."""
    counts = ("fineweb_rows", "wikitext_articles", "dolly_rows", "oasst1_trees")
    return dataclasses.replace(FULL, **{k: max(1, round(getattr(FULL, k) * scale)) for k in counts})


def hub_data(out: Path, scale: float, distinct_text: bool = False) -> Path:
    """The hub's repositories at `scale` under out/hub-<scale>/ (`distinct_text`: out/hub-<scale>-distinct/,
    HubSizes.distinct_text), written unless already there."""
    sizes = dataclasses.asdict(dataclasses.replace(scaled_sizes(scale), distinct_text=distinct_text))
    if not distinct_text:  # the stamp of data written before the option existed
        del sizes["distinct_text"]
    root = out / (f"hub-{scale:g}-distinct" if distinct_text else f"hub-{scale:g}")
    stamp = root / "sizes.json"
    if stamp.exists() and json.loads(stamp.read_text()) == sizes:
        print(f"hub data: reusing {root}")
        return root
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    write_hub_repos(root / "repos", HubSizes(**sizes))
    stamp.write_text(json.dumps(sizes))
    print(f"hub data: wrote {du(root) / 1e6:,.0f} MB under {root} in {time.perf_counter() - start:.0f} s")
    return root


def du(path: Path) -> int:
    """Bytes of the files under `path` (links not followed)."""
    if not path.exists():
        return 0
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def work_folder(out: Path, scale: float) -> Path:
    """A fresh folder to run the workflow in: the repository's workflow files linked, roam notes copied."""
    work = out / f"run-{scale:g}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in LINKED:
        (work / name).symlink_to(REPO / name)
    shutil.copytree(REPO / "data" / "sample" / "roam", work / ".roam-data")
    return work


STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile")  # resident: all, anonymous (what a job holds), file-backed (maps)
# A Snakemake job's shell command ends in `> cache/logs/<job>.log 2>&1`: every process below it is the job's.
JOB_LOG = re.compile(r"cache/logs/(\S+)\.log")


def _process_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, start time, CPU ticks used: user + system) of every process."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            table[int(stat.parent.name)] = (int(fields[1]), fields[19], int(fields[11]) + int(fields[12]))
        except (OSError, IndexError, ValueError):
            continue
    return table


class Sampler(threading.Thread):
    """Every `interval` seconds until stopped: the load average, and STATUS_FIELDS of `pid` and its
    descendants: summed over the tree (`rss`: the summed VmRSS of each sample; `peak`: each field's peak),
    and per Snakemake job (`jobs`: job -> each field's peak, summed over the job's processes; a job is the
    `cache/logs/<job>.log` its shell command writes to). Snakemake's own benchmark samples a job every
    0.5 s for 15 s, then every 30 s, and misses the peak of most jobs that last longer. `spans`: job ->
    [first, last] second (from the sampler's start) it was seen running; `cpu`: job -> CPU seconds of its
    processes, each as last sampled (a process's last `interval` before it exits is missed)."""

    def __init__(self, pid: int, interval: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.interval, self.load, self.rss = pid, interval, [], []
        self.peak = dict.fromkeys(STATUS_FIELDS, 0)
        self.jobs: dict[str, dict[str, int]] = {}
        self._labels: dict[tuple[int, str], str | None] = {}  # (pid, start time) -> job named in its command
        self.spans: dict[str, list[float]] = {}
        self._ticks: dict[str, dict[tuple[int, str], int]] = {}  # job -> (pid, start time) -> CPU ticks
        self._t0 = time.perf_counter()
        self.done = threading.Event()

    @property
    def cpu(self) -> dict[str, float]:
        hz = os.sysconf("SC_CLK_TCK")
        return {job: sum(ticks.values()) / hz for job, ticks in self._ticks.items()}

    def _label(self, pid: int, start: str) -> str | None:
        key = (pid, start)
        if key not in self._labels:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                return None
            m = JOB_LOG.search(cmd)
            self._labels[key] = m.group(1) if m else None
        return self._labels[key]

    def _job_of(self, pid: int, table: dict[int, tuple[int, str, int]]) -> str | None:
        while pid in table and pid != self.pid:
            label = self._label(pid, table[pid][1])
            if label:
                return label
            pid = table[pid][0]
        return None

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.load.append(os.getloadavg()[0])
            table = _process_table()
            now = time.perf_counter() - self._t0
            tree, frontier = [self.pid], [self.pid]
            while frontier:
                frontier = [p for p, (pp, *_) in table.items() if pp in frontier]
                tree += frontier
            total = dict.fromkeys(STATUS_FIELDS, 0)
            per_job: dict[str, dict[str, int]] = {}
            for pid in tree:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                job = self._job_of(pid, table)
                if job is not None and pid in table:
                    self.spans.setdefault(job, [now, now])[1] = now
                    self._ticks.setdefault(job, {})[(pid, table[pid][1])] = table[pid][2]
                into = [total] if job is None else [total, per_job.setdefault(job, dict.fromkeys(STATUS_FIELDS, 0))]
                for line in status.splitlines():
                    name = line.split(":", 1)[0]
                    if name in total:
                        for d in into:
                            d[name] += int(line.split()[1]) * 1024
            self.rss.append(total["VmRSS"])
            self.peak = {k: max(v, total[k]) for k, v in self.peak.items()}
            for job, fields in per_job.items():
                peak = self.jobs.setdefault(job, dict.fromkeys(STATUS_FIELDS, 0))
                self.jobs[job] = {k: max(peak[k], fields[k]) for k in STATUS_FIELDS}


def run_sampled(cmd: str, cwd: Path, env: dict, log: Path, interval: float = 1.0) -> tuple[float, Sampler]:
    """`bash -c cmd` in `cwd`, its output to `log`, its process tree sampled (Sampler); returns (wall s,
    the sampler). SystemExit naming the log if it fails."""
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, env=env, stdout=out, stderr=out)
        sampler = Sampler(proc.pid, interval)
        sampler.start()
        proc.wait()
    wall = time.perf_counter() - start
    sampler.done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"the command failed ({proc.returncode}): see {log}")
    return wall, sampler


def others_running(exclude: set[int] = frozenset()) -> list[str]:
    """Commands of the other busy processes on the machine (what shares the cores), this one and
    `exclude` left out."""
    ps = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu"], capture_output=True, text=True).stdout
    busy = []
    for line in ps.splitlines()[1:]:
        pid, cpu, args = line.split(None, 2)
        if float(cpu) >= 5 and int(pid) != os.getpid() and int(pid) not in exclude and not args.startswith("ps "):
            busy.append(f"{float(cpu):.0f}% {args[:100]}")
    return busy[:8]


def run_workflow(work: Path, root: Path, scale: float) -> dict:
    """`snakemake -j2 cache/all` in `work` against a HubServer over `root`; returns what was measured."""
    config = []
    if scale < 1:
        train, val = (round(b * scale) for b in DEFAULT_BUDGETS)
        config = ["--config", f"sources={{fineweb_edu: {{max_train_tokens: {train}, max_val_tokens: {val}}}}}"]
    # -p --quiet host: each job's block and command in snakemake.log (profiles/default hides them; the rule
    # rounds and bench_job_memory read them)
    cmd = [sys.executable, "-m", "snakemake", "-p", "--quiet", "host", "-j2", "cache/all", *config]
    print("running:", " ".join(cmd), f"(in {work})")
    print("busy before:", *others_running(), sep="\n  ")
    with HubServer(root / "repos") as hub:
        env = hub_env(hub, work / "hf_home")
        cpu_before = time.process_time()
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=work, env=env, stdout=open(work / "snakemake.log", "w"), stderr=subprocess.STDOUT
        )
        sampler = Sampler(proc.pid, JOB_SAMPLE_S)
        sampler.start()
        busy_during = []
        while proc.poll() is None:
            time.sleep(5)
            busy_during.append(others_running({proc.pid, *descendants(proc.pid)}))
        wall = time.perf_counter() - start
        sampler.done.set()
        sampler.join()
        server_cpu = time.process_time() - cpu_before
        requests = hub.requests.snapshot()
    if proc.returncode:
        print((work / "snakemake.log").read_text()[-3000:])
        raise SystemExit(f"snakemake failed ({proc.returncode}): see {work / 'snakemake.log'}")
    seen = sorted({b.split(" ", 1)[1] for snapshot in busy_during for b in snapshot})
    return {
        "wall_s": wall,
        "peak_rss_sum": max(sampler.rss, default=0),
        "peak_anon_sum": sampler.peak["RssAnon"],
        "peak_file_sum": sampler.peak["RssFile"],
        "jobs": sampler.jobs,
        "spans": sampler.spans,
        "job_cpu": sampler.cpu,
        "load": sampler.load,
        "server_cpu_s": server_cpu,
        "requests": [dataclasses.asdict(r) for r in requests],
        "others": seen[:12],
    }


def rule_times(work: Path) -> list[dict]:
    """Snakemake's benchmark rows (cache/benchmarks/**/*.tsv): wall s, CPU s, max RSS / PSS MB per job."""
    rows = []
    for tsv in sorted((work / "cache" / "benchmarks").rglob("*.tsv")):
        with open(tsv) as f:
            (row,) = list(csv.DictReader(f, delimiter="\t"))
        rows.append(
            {
                "job": tsv.relative_to(work / "cache" / "benchmarks").with_suffix("").as_posix(),
                "s": float(row["s"]),
                "cpu_s": float(row.get("cpu_time") or 0),
                "max_rss_mb": float(row["max_rss"]) if row["max_rss"] not in ("", "NA", "-") else 0.0,
                "max_pss_mb": float(row["max_pss"]) if row.get("max_pss") not in (None, "", "NA", "-") else 0.0,
            }
        )
    return rows


def http_summary(requests: list[dict], tokenizer_done: float) -> dict[str, dict]:
    """{repo (and, for requests sent while the tokenizer job ran, "repo, tokenizer sample"): {requests,
    data requests, bytes sent, data bytes sent}} from the hub's request log."""
    out: dict[str, dict] = {}
    for r in requests:
        parts = r["path"].split("?")[0].split("/")
        repo = "/".join(parts[2:4]) if parts[1] == "datasets" else "/".join(parts[3:5])
        if r["time"] < tokenizer_done:
            repo += ", tokenizer sample"
        entry = out.setdefault(repo, {"requests": 0, "data_requests": 0, "bytes": 0, "data_bytes": 0})
        entry["requests"] += 1
        entry["bytes"] += r["bytes_sent"]
        if r["path"].split("?")[0].endswith((".parquet", ".jsonl")):
            entry["data_requests"] += 1
            entry["data_bytes"] += r["bytes_sent"]
    return out


def fineweb_files(root: Path) -> list[Path]:
    return sorted((root / "repos" / FINEWEB_REPO / "data" / "CC-MAIN-2024-10").glob("*.parquet"))


def fineweb_texts(root: Path, n_docs: int | None = None, n_chars: int | None = None) -> list[str]:
    """The first `n_docs` texts (or up to `n_chars` characters) of the fineweb-edu files, in file order."""
    import pyarrow.parquet as pq

    texts, chars = [], 0
    for path in fineweb_files(root):
        for batch in pq.ParquetFile(path).iter_batches(columns=["text"], batch_size=10_000):
            for text in batch.column(0).to_pylist():
                texts.append(text)
                chars += len(text)
                if (n_docs is not None and len(texts) >= n_docs) or (n_chars is not None and chars >= n_chars):
                    return texts
    return texts


def rows_read(root: Path, documents: int) -> dict:
    """What `documents` fineweb-edu rows weigh: their share of the files' rows times the files' bytes, and
    their text's UTF-8 bytes (the mean over every row times `documents`)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rows = file_bytes = text_bytes = 0
    for path in fineweb_files(root):
        table = pq.read_table(path, columns=["text"])
        rows += table.num_rows
        file_bytes += path.stat().st_size
        text_bytes += pc.sum(pc.binary_length(table.column(0).cast("binary"))).as_py()
    return {
        "rows": rows,
        "file_bytes": file_bytes,
        "rows_read": documents,
        "parquet_bytes_of_rows_read": file_bytes * documents / rows,
        "text_bytes_of_rows_read": text_bytes * documents / rows,
    }


def pool_count_rate(tok, batches: list[list[str]], workers: int, passes: int) -> tuple[list[float], int]:
    """([wall seconds of each pass], tokens) of a Pool(workers) that only counts tokens, started before the clock."""
    with multiprocessing.Pool(workers, initializer=_pool_init, initargs=(tok.model_path,)) as pool:
        seconds = []
        for _ in range(passes):
            start = time.perf_counter()
            n = sum(pool.imap(_pool_count, batches))
            seconds.append(time.perf_counter() - start)
        return seconds, n


START_BUILD = """
import sys
from niels_gpt.pretrain.writer import build_pretrain_cache
from niels_gpt.tokenizer import SentencePieceTokenizer
if __name__ == "__main__":
    build_pretrain_cache(["One short document."], sys.argv[2], tokenizer=SentencePieceTokenizer(sys.argv[1]),
        max_train_tokens=None, max_val_tokens=None, seed=42, shuffle_buffer=None, num_threads=2, check_empty=False)
    print("torch" in sys.modules)
"""
START_POOL = """
import sys
from multiprocessing import Pool
from benchmarks.encode_limit import _pool_count, _pool_init
if __name__ == "__main__":
    with Pool(2, initializer=_pool_init, initargs=(sys.argv[1],)) as pool:
        print(sum(pool.imap(_pool_count, [["One short document."]] * 2)))
"""


def fixed_start(tok, out: Path, packages: dict[str, str], rounds: int = 5) -> None:
    """Median wall seconds of a fresh process that builds a one-document cache (imports, tokenizer, workers,
    shards, meta.json) with each of `packages` ({label: package name}) against one that starts a Pool(2),
    counts two one-document batches and stops: what every build pays once before and after its tokens."""
    scripts = {label: START_BUILD.replace("niels_gpt", package) for label, package in packages.items()}
    scripts["Pool(2)"] = START_POOL
    times: dict[str, list[float]] = {label: [] for label in scripts}
    torch_imported = {}
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO), str(out.parent / "packages")]))
    for _ in range(rounds):
        for label, code in scripts.items():
            script = out / "start.py"
            script.write_text(code)
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, str(script), tok.model_path, str(out / "start_build")],
                cwd=out,
                env={**os.environ, "PYTHONPATH": path},
                capture_output=True,
                text=True,
                check=True,
            )
            times[label].append(time.perf_counter() - start)
            torch_imported[label] = done.stdout.split()[-1]
    print(f"fixed start, a fresh process (median of {rounds}, interleaved):")
    for label, seconds in times.items():
        what = "start, two one-document batches, stop" if label == "Pool(2)" else "builds one document"
        torch = "" if label == "Pool(2)" else f" (torch imported: {torch_imported[label]})"
        print(f"  {label:16s} {what}: {statistics.median(seconds):.2f} s{torch}")


def build_in_process(tok, docs: list[str], out: Path, workers: int, writer=pretrain_writer) -> None:
    """`writer.build_pretrain_cache` of `docs`, no budget: every token written, hashed, split by the rule."""
    unlimited = {"max_train_tokens": None, "max_val_tokens": None, "shuffle_buffer": None}
    writer.build_pretrain_cache(docs, str(out), tokenizer=tok, seed=42, num_threads=workers, **unlimited)


def report_run(work: Path, root: Path, measured: dict) -> dict:
    rules = rule_times(work)
    print(
        f"\nsnakemake -j2 cache/all: {measured['wall_s']:.0f} s wall; summed peak RSS of the process tree "
        f"{measured['peak_rss_sum'] / 2**20:,.0f} MiB (peak anonymous {measured.get('peak_anon_sum', 0) / 2**20:,.0f}, "
        f"file-backed {measured.get('peak_file_sum', 0) / 2**20:,.0f}); load average min/median/max "
        f"{min(measured['load'], default=0):.1f}/{statistics.median(measured['load'] or [0]):.1f}/"
        f"{max(measured['load'], default=0):.1f}; hub server CPU {measured['server_cpu_s']:.0f} s"
    )
    print("other busy processes seen:", *(measured["others"] or ["none"]), sep="\n  ")
    jobs = measured.get("jobs", {})
    print(
        f"\n{'job':32s} {'wall s':>7s} {'CPU s':>7s} {'max RSS MB':>11s} {'max PSS MB':>11s}   "
        f"sampled every {JOB_SAMPLE_S} s: {'peak RSS MiB':>12s} {'anonymous':>9s} {'file-backed':>11s}"
    )
    for r in rules:
        peak = {k: v / 2**20 for k, v in jobs.get(r["job"], dict.fromkeys(STATUS_FIELDS, 0)).items()}
        print(
            f"{r['job']:32s} {r['s']:7.1f} {r['cpu_s']:7.1f} {r['max_rss_mb']:11.0f} {r['max_pss_mb']:11.0f}   "
            f"{'':>20s} {peak['VmRSS']:12,.0f} {peak['RssAnon']:9,.0f} {peak['RssFile']:11,.0f}"
        )
    report_timeline(measured)
    disk = {
        "cache": du(work / "cache"),
        "hf_home": du(work / "hf_home"),
        "hub files": du(root / "repos"),
    }
    print("\ndisk:", ", ".join(f"{k} {v / 1e6:,.0f} MB" for k, v in disk.items()))
    tokenizer_done = (work / "cache" / "benchmarks" / "tokenizer.tsv").stat().st_mtime
    http = http_summary(measured["requests"], tokenizer_done)
    print("\nHTTP, per repository: requests (data files), body bytes sent (data files)")
    for repo, h in sorted(http.items()):
        print(
            f"  {repo:54s} {h['requests']:6d} ({h['data_requests']:5d}) {h['bytes'] / 1e6:12,.1f} MB "
            f"({h['data_bytes'] / 1e6:,.1f} MB)"
        )
    meta = json.loads((work / "cache" / "pretrain" / "fineweb_edu" / "meta.json").read_text())
    read = rows_read(root, meta["documents_seen"])
    fetched = http.get(FINEWEB_REPO, {}).get("data_bytes", 0)
    print(
        f"fineweb-edu: {read['rows_read']:,} of {read['rows']:,} rows tokenized: "
        f"~{read['parquet_bytes_of_rows_read'] / 1e6:,.0f} MB of parquet "
        f"(~{read['text_bytes_of_rows_read'] / 1e6:,.0f} MB of text) of {read['file_bytes'] / 1e6:,.0f} MB; "
        f"fetched {fetched / 1e6:,.0f} MB = {fetched / read['parquet_bytes_of_rows_read']:.2f}x the parquet "
        f"bytes of the rows tokenized, {fetched / read['file_bytes']:.2f}x the files"
    )
    return {"rules": rules, "disk": disk, "http": http, "fineweb_meta": meta, "fineweb_read": read}


def report_timeline(measured: dict) -> None:
    """When each job ran and the CPU it used (sampled from /proc), in order of start, with the cores' use."""
    spans, cpu = measured.get("spans") or {}, measured.get("job_cpu") or {}
    if not spans:
        return
    print(
        f"\ntimeline (sampled every {JOB_SAMPLE_S} s): {'start s':>8s} {'end s':>7s} {'CPU s':>7s} {'CPU / wall':>10s}"
    )
    for job, (first, last) in sorted(spans.items(), key=lambda item: item[1][0]):
        busy = cpu.get(job, 0.0)
        print(f"  {job:32s} {first:8.1f} {last:7.1f} {busy:7.1f} {busy / max(last - first, JOB_SAMPLE_S):10.2f}")
    total = sum(cpu.values())
    print(
        f"  jobs' CPU {total:,.0f} s in {measured['wall_s']:.0f} s of wall: {total / measured['wall_s']:.2f} "
        f"cores busy on average (of {os.cpu_count()})"
    )


def report_limit(work: Path, root: Path, result: dict, workers: int) -> None:
    """The fineweb_edu rule's tokens/s against a Pool(2) count over the same documents."""
    meta = result["fineweb_meta"]
    tok = SentencePieceTokenizer(work / "cache" / "tokenizer" / "spm.model")
    docs = fineweb_texts(root, n_docs=meta["documents_seen"])
    batches = list(batch_encode.text_batches(docs, lambda: float("inf")))
    seconds, n_tokens = pool_count_rate(tok, batches, workers, passes=3)
    tokens = meta["train_tokens"] + meta["val_tokens"]
    (rule,) = [r for r in result["rules"] if r["job"] == "pretrain/fineweb_edu"]
    build_rate, pool_rate = tokens / rule["s"], n_tokens / statistics.median(seconds)
    print(
        f"\nfineweb_edu rule: {tokens:,} tokens in {rule['s']:.1f} s = {build_rate / 1e6:.2f} M tok/s; "
        f"Pool({workers}) count on the same {len(docs):,} documents ({n_tokens:,} tokens): "
        f"{', '.join(f'{s:.1f}' for s in seconds)} s, median {pool_rate / 1e6:.2f} M tok/s; "
        f"ratio {build_rate / pool_rate:.2f}"
    )


def package_at(revision: str, out: Path) -> str:
    """niels_gpt as of git `revision`, importable beside this one as `niels_gpt_<sha>` (`source_at`'s files
    copied under out/packages/, every `niels_gpt` name in them renamed): the build before a change, timed in
    the same process and rounds as the build after it."""
    source = source_at(revision, out)
    name = "niels_gpt_" + source.name.removeprefix("source_")
    dest = out / "packages"
    if not (dest / name).exists():
        tmp = dest / f"{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source / "niels_gpt", tmp)
        for py in tmp.rglob("*.py"):
            py.write_text(re.sub(r"\bniels_gpt\b", name, py.read_text()))
        tmp.rename(dest / name)
    sys.path.insert(0, str(dest))
    return name


def report_compare(work: Path, root: Path, rounds: int, compare_chars: int, workers: int, before: str | None) -> None:
    """The fixed start, and build_pretrain_cache in this process against the tokenizer's limit, interleaved
    (and the build as of git revision `before`, in the same rounds)."""
    model = work / "cache" / "tokenizer" / "spm.model"
    tok = SentencePieceTokenizer(model)
    packages = {"build": "niels_gpt"}
    if before:
        packages[f"build at {before}"] = package_at(before, work.parent)
    fixed_start(tok, work, packages)
    docs = fineweb_texts(root, n_chars=compare_chars)
    batches = list(batch_encode.text_batches(docs, lambda: float("inf")))
    n_tokens = sum(len(ids) for b in batches for ids in tok.encode_batch(b, num_threads=workers))
    print(f"in-process build vs the tokenizer's limit on {sum(map(len, docs)):,} chars, {n_tokens:,} tokens:")
    out = work / "compare_build"
    contenders = {"build": with_workers_cpu(lambda: build_in_process(tok, docs, out, workers))}
    if before:
        name = packages[f"build at {before}"]
        old_writer = importlib.import_module(f"{name}.pretrain.writer")
        old_tok = importlib.import_module(f"{name}.tokenizer").SentencePieceTokenizer(model)
        contenders[f"build at {before}"] = with_workers_cpu(
            lambda: build_in_process(old_tok, docs, out, workers, writer=old_writer)
        )
    compare(tok, batches, n_tokens, contenders, rounds, workers)
    shutil.rmtree(out, ignore_errors=True)


def rule_command(work: Path) -> str:
    """The fineweb_edu rule's shell command as the run's Snakemake printed it, without its log redirect and
    with `{out}` for its output folder."""
    for line in (work / "snakemake.log").read_text().splitlines():
        if line.startswith("Shell command:") and "build-pretrain --source fineweb_edu" in line:
            cmd = line.split(":", 1)[1].split(" > ")[0].strip()
            return re.sub(r"--out-dir \$\(dirname [^)]*\)", "--out-dir {out}", cmd)
    raise SystemExit(f"no fineweb_edu rule command in {work / 'snakemake.log'}: run without --skip-run first")


def source_at(revision: str, out: Path) -> Path:
    """A folder holding niels_gpt as of git `revision` under its own name (PYTHONPATH for a subprocess)."""
    sha = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True)
    dest = out / "packages" / f"source_{sha.stdout.strip()}"
    if not dest.exists():
        tmp = dest.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", revision, "niels_gpt"], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        tmp.rename(dest)
    return dest


def run_rule(cmd: str, work: Path, out: Path, env: dict, hub) -> dict:
    """The fineweb_edu rule's command run once into `out`: wall s, summed peak RSS of its process tree,
    the fineweb-edu data bytes the hub sent, the tokens written and the sha256 of every shard."""
    import hashlib

    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    seen = len(hub.requests.snapshot())
    wall, sampler = run_sampled(cmd.replace("{out}", str(out)), work, env, out.with_suffix(".log"))
    fetched = [r for r in hub.requests.snapshot()[seen:] if FINEWEB_REPO in r.path]
    meta = json.loads((out / "meta.json").read_text())
    shards = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*.bin")}
    return {
        "s": wall,
        "rss": max(sampler.rss, default=0),
        "http": sum(r.bytes_sent for r in fetched if r.path.split("?")[0].endswith(".parquet")),
        "tokens": meta["train_tokens"] + meta["val_tokens"],
        "documents": meta["documents_seen"],
        "shards": shards,
    }


def report_rule_rounds(work: Path, root: Path, rounds: int, workers: int, before: str | None) -> None:
    """The fineweb_edu rule alone (its command as the run's Snakemake ran it, against the hub, the run's
    HF_HOME and tokenizer), as of now and as of git revision `before`, and a Pool(2) count of the same
    documents, interleaved over `rounds`: medians of tokens/s, the ratio to the pool, peak RSS, HTTP bytes."""
    cmd = rule_command(work)
    versions = {"after": None}
    if before:
        versions[f"before ({before})"] = source_at(before, work.parent)
    tok = SentencePieceTokenizer(work / "cache" / "tokenizer" / "spm.model")
    meta = json.loads((work / "cache" / "pretrain" / "fineweb_edu" / "meta.json").read_text())
    batches = list(batch_encode.text_batches(fineweb_texts(root, n_docs=meta["documents_seen"]), lambda: float("inf")))
    runs: dict[str, list[dict]] = {label: [] for label in versions}
    pool_s: list[float] = []
    print(f"\nthe fineweb_edu rule alone, {rounds} interleaved rounds: {cmd[:120]}...")
    print("busy before:", *others_running(), sep="\n  ")
    with HubServer(root / "repos") as hub:
        base = hub_env(hub, work / "hf_home")
        for r in range(rounds):
            for label, source in versions.items():
                path = os.pathsep.join(filter(None, [str(source) if source else None, base.get("PYTHONPATH")]))
                env = {**base, "PYTHONPATH": path} if path else base
                slug = re.sub(r"\W+", "_", label).strip("_")
                runs[label].append(run_rule(cmd, work, work / "rule_rounds" / slug, env, hub))
            seconds, n_tokens = pool_count_rate(tok, batches, workers, passes=1)
            pool_s += seconds
            print(
                f"  round {r + 1}: "
                + ", ".join(f"{label} {runs[label][-1]['s']:.1f} s" for label in versions)
                + f", Pool({workers}) count {seconds[0]:.1f} s; load {os.getloadavg()[0]:.1f}"
            )
    pool_rate = n_tokens / statistics.median(pool_s)
    print(f"Pool({workers}) count, {n_tokens:,} tokens: median {pool_rate / 1e6:.2f} M tok/s")
    for label, done in runs.items():
        rate = statistics.median(d["tokens"] / d["s"] for d in done)
        per_round = statistics.median(d["tokens"] / d["s"] / (n_tokens / s) for d, s in zip(done, pool_s))
        print(
            f"  {label}: {done[0]['tokens']:,} tokens, {done[0]['documents']:,} documents; median "
            f"{statistics.median(d['s'] for d in done):.1f} s = {rate / 1e6:.2f} M tok/s, ratio {rate / pool_rate:.2f} "
            f"(per-round median {per_round:.2f}); peak RSS (process tree) "
            f"{max(d['rss'] for d in done) / 2**20:,.0f} MiB; HTTP parquet bytes {done[0]['http'] / 1e6:,.1f} MB"
        )
    shards = [d["shards"] for done in runs.values() for d in done]
    print("shards byte-identical across versions and rounds:", all(s == shards[0] for s in shards), len(shards[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of full size (0.01: a quick check)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "full_build", help="data and runs")
    ap.add_argument("--rounds", type=int, default=5, help="counted rounds of the in-process comparison")
    ap.add_argument("--compare-chars", type=int, default=100_000_000, help="text for the in-process comparison")
    ap.add_argument("--workers", type=int, default=2, help="the pretrain rule's threads")
    ap.add_argument("--before", default=None, help="also time the build as of this git revision, in the same rounds")
    ap.add_argument("--skip-run", action="store_true", help="report the last run at this scale again")
    ap.add_argument(
        "--rule-rounds",
        type=int,
        default=0,
        help="then time the fineweb_edu rule alone this many rounds (now and at --before) against Pool(2) count",
    )
    ap.add_argument(
        "--run-only", action="store_true", help="only the run and its report (per-job RSS): no limit, no comparison"
    )
    ap.add_argument(
        "--distinct-text",
        action="store_true",
        help="hub data whose fineweb-edu and wikitext rows past the generators' pools share almost no 13-gram "
        "(a word inserted every 4-8 words); the default data draws whole pool paragraphs, so nearly every train "
        "document shares 13-grams with val: curation's worst case",
    )
    ap.add_argument(
        "--compare-only",
        action="store_true",
        help="only the fixed start and the in-process comparison, with the last run's tokenizer",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    root = hub_data(args.out, args.scale, args.distinct_text)
    work = args.out / f"run-{args.scale:g}"
    if not args.compare_only:
        if args.skip_run:
            measured = json.loads((work / "measured.json").read_text())
        else:
            work = work_folder(args.out, args.scale)
            measured = run_workflow(work, root, args.scale)
            (work / "measured.json").write_text(json.dumps(measured))
        result = report_run(work, root, measured)
        if args.run_only:
            return
        report_limit(work, root, result, args.workers)
        if args.rule_rounds:
            report_rule_rounds(work, root, args.rule_rounds, args.workers, args.before)
            return
    report_compare(work, root, args.rounds, args.compare_chars, args.workers, args.before)


if __name__ == "__main__":
    main()
