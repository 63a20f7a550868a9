"""scripts.lint_workflow: parses `snakemake --lint` output and fails only on findings not kept on purpose."""

from __future__ import annotations

import subprocess

from scripts import lint_workflow

INTENTIONAL = lint_workflow.INTENTIONAL[0]
LINT_OUTPUT = f"""Using workflow specific profile profiles/default for setting default command line arguments.
Lints for rule tokenizer (line 9, rules/tokenizer.smk):
    * {INTENTIONAL}:
      It is recommended to pass all files as input and output, and non-file
      parameters via the params directive.

Lints for rule sft (line 6, rules/sft.smk):
    * {INTENTIONAL}:
      It is recommended to pass all files as input and output.
"""
UNEXPECTED = """Lints for snakefile Snakefile:
    * Mixed rules and functions in same snakefile.:
      Small one-liner functions used only once should be defined as lambda expressions.
"""


def _run_with(monkeypatch, returncode: int, stdout: str):
    def fake_run(cmd, **kwargs):
        assert cmd[1:] == ["-m", "snakemake", "--lint", "--config", "demo=true"]
        return subprocess.CompletedProcess(cmd, returncode, stdout=stdout, stderr="")

    monkeypatch.setattr(lint_workflow.subprocess, "run", fake_run)
    return lint_workflow.main()


def test_findings_are_where_and_title():
    assert lint_workflow.findings(LINT_OUTPUT + UNEXPECTED) == [
        ("rule tokenizer (line 9, rules/tokenizer.smk)", INTENTIONAL),
        ("rule sft (line 6, rules/sft.smk)", INTENTIONAL),
        ("snakefile Snakefile", "Mixed rules and functions in same snakefile."),
    ]


def test_only_the_intentional_finding_passes(monkeypatch, capsys):
    assert _run_with(monkeypatch, 1, LINT_OUTPUT) == 0
    assert capsys.readouterr().out.startswith("snakemake --lint: 0 finding(s), 2 intentional")


def test_any_other_finding_fails_and_is_named(monkeypatch, capsys):
    assert _run_with(monkeypatch, 1, LINT_OUTPUT + UNEXPECTED) == 1
    out = capsys.readouterr().out
    assert "lint: snakefile Snakefile: Mixed rules and functions in same snakefile." in out


def test_a_lint_that_did_not_run_fails(monkeypatch, capsys):
    assert _run_with(monkeypatch, 1, "Error in Snakefile: SyntaxError\n") == 1
    assert "snakemake --lint failed to run" in capsys.readouterr().err


def test_the_hub_settings_on_the_command_line_are_kept_on_purpose(monkeypatch, capsys):
    hub = (
        "Lints for rule pretrain (line 25, rules/pretrain.smk):\n"
        "    * Shell command directly uses variable HUB_SETTINGS from outside of the rule:\n"
    )
    assert _run_with(monkeypatch, 1, LINT_OUTPUT + hub) == 0
    assert capsys.readouterr().out.startswith("snakemake --lint: 0 finding(s), 3 intentional")
