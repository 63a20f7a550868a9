"""run_summary.py: a run ends with one line per job it built, or with the failed job's error line last."""

from __future__ import annotations

import json
from pathlib import Path

from niels_gpt.keep import Group
from niels_gpt.run_summary import error_lines, failed, failure_message, success_message


def job(tmp_path: Path, name: str, outputs: dict[str, object], log: str | None) -> Group:
    paths = []
    for rel, content in outputs.items():
        p = tmp_path / rel
        paths.append(str(p))
        if content is None:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content if isinstance(content, str) else json.dumps(content))
    logs = []
    if log is not None:
        lp = tmp_path / "logs" / f"{name}.log"
        lp.parent.mkdir(parents=True, exist_ok=True)
        lp.write_text(log)
        logs.append(str(lp))
    return Group(name, paths, logs=logs)


def test_a_successful_run_prints_one_line_per_job_from_its_meta(tmp_path):
    sft = job(
        tmp_path,
        "sft (source=primer)",
        {
            "sft/primer/train_tokens.bin": "x",
            "sft/primer/meta.json": {
                "kind": "sft",
                "train_examples": 180,
                "val_examples": 20,
                "train_tokens": 84991,
                "val_tokens": 19898,
            },
        },
        log="",
    )
    tok = job(
        tmp_path,
        "tokenizer",
        {
            "tokenizer/spm.model": "m",
            "tokenizer/meta.json": {"kind": "tokenizer", "vocab_size": 16004, "sha256": "ab" * 32},
        },
        log="",
    )
    flag = Group("all", [str(tmp_path / "all")], logs=[])  # the aggregate flag: not a job worth a line
    report = job(tmp_path, "report_sft", {"report/sft_mix.svg": "<svg/>", "report/sft_supervision.svg": "<svg/>"}, "")
    lines = success_message([report, sft, flag, tok]).splitlines()  # in the DAG's order: any
    assert lines[0] == "niels_gpt: built"
    assert lines[2] == (
        f"  sft (source=primer): train 180 examples, val 20 examples; train 84,991 tokens, val 19,898 tokens "
        f"-> {tmp_path}/sft/primer/ (2 outputs)"
    )
    assert lines[1] == f"  tokenizer: 16,004 ids, sha256 abababab -> {tmp_path}/tokenizer/ (2 outputs)"  # data flow
    assert lines[3] == f"  report_sft: wrote {tmp_path}/report/ (2 outputs)"
    assert len(lines) == 4


def test_curation_jobs_come_between_the_raw_builds_and_the_reports(tmp_path):
    names = ["report_sft", "certificate", "curate_sft (source=primer)", "streams (source=wiki)", "curate"]
    names += ["sft (source=primer)", "pretrain_merge (source=fineweb_edu)", "pretrain (source=wikitext)"]
    groups = [job(tmp_path, name, {f"{k}/out.txt": "x"}, log="") for k, name in enumerate(names)]
    lines = [line.split(":")[0].strip() for line in success_message(groups).splitlines()[1:]]
    assert lines == [
        "pretrain (source=wikitext)",
        "sft (source=primer)",
        "curate",
        "pretrain_merge (source=fineweb_edu)",
        "curate_sft (source=primer)",
        "streams (source=wiki)",
        "certificate",
        "report_sft",
    ]


def test_a_failed_run_names_what_was_kept_and_ends_with_the_error_line(tmp_path):
    log = "sft/primer: T_max=1024\nTraceback? no\nerror: data/primer.jsonl:3: 'messages' must be a list, got str\n"
    broken = job(tmp_path, "sft (source=primer)", {"sft/primer/meta.json": None}, log=log)
    fresh = job(tmp_path, "streams (source=wiki)", {"streams/wiki_train.bin": None}, log="Killed\n")
    waiting = job(tmp_path, "report_sft", {"report/sft_mix.svg": None}, log=None)  # never started
    done = job(tmp_path, "tokenizer", {"tokenizer/meta.json": {"kind": "tokenizer"}}, log="ok\n")
    assert failed([broken, fresh, waiting, done]) == [broken, fresh]
    kept = Group("sft (source=primer)", broken.outputs, present=broken.outputs)
    text = failure_message([broken, fresh], [kept])
    lines = text.splitlines()
    assert (
        lines[0] == f"sft (source=primer) failed; kept the previous {broken.outputs[0]}: it is there as before the run"
    )
    assert lines[2] == "  error: data/primer.jsonl:3: 'messages' must be a list, got str"
    assert lines[3] == "streams (source=wiki) failed; it had no previous version to keep"
    assert lines[-1] == "  Killed"  # no error: line -> the log's last line
    unrecorded = failure_message([broken], [kept], records=False).splitlines()
    assert unrecorded[1] == "  (Snakemake may take it for up to date: rebuild it with -R sft)"


def test_error_lines_are_the_last_three_error_lines_of_the_log(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("".join(f"error: {k}\n" for k in range(5)) + "\n")
    assert error_lines(log) == ["error: 2", "error: 3", "error: 4"]
    assert error_lines(tmp_path / "missing.log") == []
