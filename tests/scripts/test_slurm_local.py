"""scripts/slurm_local.sh without a cluster, called as the README writes it (`scripts/slurm_local.sh ...`
from the repository root): argument handling, root through sudo, the refusals of a slurm.conf it did not
write, and --replace-conf's move aside and back. PATH holds only fakes (id, sudo, sinfo, munge, the
daemons, apt-get) and links to the plain tools the script uses; its files go to a temporary folder
(SLURM_LOCAL_CONF, SLURM_LOCAL_DIR), so nothing on the machine is installed, started or changed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.workflow.test_workflow import ROOT

SCRIPT = "scripts/slurm_local.sh"
USAGE = f"usage: {SCRIPT} start [--replace-conf] | status | stop"
TOOLS = "bash env readlink grep awk mkdir cat mv rm cp nproc hostname timeout seq sleep chmod dirname".split()
FOREIGN = "# the site's own\nClusterName=site\n"
DAEMON = '#!/bin/bash\nsleep 300 >/dev/null 2>&1 &\necho $! > "$SLURM_LOCAL_DIR/{name}.pid"\n'
FAKES = {
    "id": '#!/bin/bash\necho "${FAKE_UID:-0}"\n',
    "sudo": '#!/bin/bash\necho "sudo $*" >> "$FAKE_LOG"\n',
    # a controller answers when asked to (FAKE_CONTROLLER) or once the script's own slurm.conf is in place
    "sinfo": (
        "#!/bin/bash\n"
        'if [[ -n "${FAKE_CONTROLLER:-}" ]] || grep -qF "written by niels_gpt" "$SLURM_CONF" 2>/dev/null; then\n'
        '  case "$*" in *%t*) echo idle ;; *) echo "local* up infinite 1 idle node" ;; esac; exit 0\n'
        "fi\n"
        'echo "Unable to contact slurm controller (connect failure)" >&2; exit 1\n'
    ),
    "munge": "#!/bin/bash\necho credential\n",
    "unmunge": "#!/bin/bash\ncat >/dev/null\n",
    "munged": "#!/bin/bash\nexit 1\n",
    "scontrol": "#!/bin/bash\nexit 0\n",
    "apt-get": '#!/bin/bash\necho "apt-get must not run here" >&2; exit 1\n',
    "slurmctld": DAEMON.format(name="slurmctld"),
    "slurmd": DAEMON.format(name="slurmd"),
}


class Machine:
    """A fake machine: its PATH, the script's files and a log of what sudo was asked."""

    def __init__(self, root: Path):
        self.bin, self.conf, self.dir, self.log = root / "bin", root / "etc" / "slurm.conf", root / "lib", root / "log"
        self.saved = Path(f"{self.conf}.before-slurm-local")
        self.bin.mkdir()
        self.conf.parent.mkdir()
        for tool in TOOLS:
            (self.bin / tool).symlink_to(shutil.which(tool))
        for name, text in FAKES.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        env = {
            "PATH": str(self.bin),
            "SLURM_LOCAL_CONF": str(self.conf),
            "SLURM_LOCAL_DIR": str(self.dir),
            "FAKE_LOG": str(self.log),
            **env,
        }
        return subprocess.run([SCRIPT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    def daemons(self) -> list[int]:
        return [int(p.read_text()) for p in self.dir.glob("*.pid")] if self.dir.exists() else []


@pytest.fixture
def machine(tmp_path):
    m = Machine(tmp_path)
    yield m
    for pid in m.daemons():  # a failed test's fake daemons
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def test_a_wrong_command_or_option_prints_the_usage(machine):
    for args in [(), ("bogus",), ("start", "--bogus"), ("start", "--replace-conf", "x"), ("stop", "now")]:
        proc = machine.run(*args)
        assert (proc.returncode, proc.stderr.strip()) == (2, USAGE), args


def test_start_and_stop_as_a_user_run_themselves_again_through_sudo(machine):
    for args in [("start",), ("start", "--replace-conf"), ("stop",)]:
        proc = machine.run(*args, FAKE_UID="1000")
        assert proc.returncode == 0 and f"{args[0]} needs root: running it through sudo" in proc.stderr
    again = f"sudo -- env SLURM_LOCAL_DIR={machine.dir} SLURM_LOCAL_CONF={machine.conf} {ROOT / SCRIPT}"
    assert machine.log.read_text().splitlines() == [f"{again} start", f"{again} start --replace-conf", f"{again} stop"]
    assert not machine.conf.exists() and not machine.dir.exists()


def test_without_root_or_sudo_it_says_how_to_run_it(machine):
    (machine.bin / "sudo").unlink()
    proc = machine.run("start", FAKE_UID="1000")
    assert proc.returncode == 1 and proc.stderr == (
        "slurm_local: start needs root (it installs packages and starts daemons) and there is no sudo here: "
        f"run it as root, e.g. su -c '{ROOT / SCRIPT} start'\n"
    )


def test_status_needs_no_root(machine):
    proc = machine.run("status", FAKE_UID="1000")
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == "no SLURM controller answers"


def test_a_foreign_slurm_conf_without_a_controller_is_refused_with_the_command_that_moves_it(machine):
    machine.conf.write_text(FOREIGN)
    proc = machine.run("start")
    assert proc.returncode == 1 and proc.stderr == (
        f"slurm_local: {machine.conf} was not written by this script, and no SLURM controller answers. "
        f"To start the one-node cluster anyway: {SCRIPT} start --replace-conf (moves it to {machine.saved}; "
        f"{SCRIPT} stop moves it back)\n"
    )
    assert machine.conf.read_text() == FOREIGN and not machine.dir.exists()


def test_a_foreign_slurm_conf_with_a_controller_answering_is_left_alone(machine):
    machine.conf.write_text(FOREIGN)
    for args in [("start",), ("start", "--replace-conf")]:
        proc = machine.run(*args, FAKE_CONTROLLER="1")
        assert proc.returncode == 1 and proc.stderr == (
            f"slurm_local: {machine.conf} was not written by this script and a SLURM controller answers (sinfo): "
            "this machine has a cluster already; use it (README: Running on a cluster) instead of starting this one\n"
        )
    assert machine.conf.read_text() == FOREIGN and not machine.saved.exists()


def test_replace_conf_moves_the_foreign_conf_aside_and_stop_moves_it_back(machine):
    machine.conf.write_text(FOREIGN)
    proc = machine.run("start", "--replace-conf")
    assert proc.returncode == 0, proc.stderr
    assert f"moved {machine.conf} to {machine.saved} ({SCRIPT} stop moves it back)" in proc.stdout
    assert machine.saved.read_text() == FOREIGN
    assert "written by niels_gpt scripts/slurm_local.sh" in machine.conf.read_text()
    daemons = machine.daemons()
    assert len(daemons) == 2 and "slurmctld: pid" in machine.run("status").stdout

    again = machine.run("start", "--replace-conf")  # its own conf now: written again, nothing moved
    assert again.returncode == 0 and "moved" not in again.stdout and "slurmd already running" in again.stdout

    proc = machine.run("stop")
    assert proc.returncode == 0, proc.stderr
    assert f"moved {machine.saved} back to {machine.conf}" in proc.stdout
    assert machine.conf.read_text() == FOREIGN and not machine.saved.exists()
    for pid in daemons:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_conf_moved_aside_earlier_is_never_overwritten(machine):
    machine.conf.write_text(FOREIGN)
    machine.saved.write_text("# moved aside before\n")
    proc = machine.run("start", "--replace-conf")
    assert proc.returncode == 1 and f"{machine.saved} exists already" in proc.stderr
    assert machine.saved.read_text() == "# moved aside before\n" and machine.conf.read_text() == FOREIGN
