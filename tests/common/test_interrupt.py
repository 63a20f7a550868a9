"""interrupt.py: a Ctrl-C swallowed on its way (as by a C extension's import) still stops every publish."""

from __future__ import annotations

import os
import signal

import pytest

from niels_gpt import interrupt
from niels_gpt.atomic import StagedFile


def swallowed_ctrl_c() -> None:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a call: the handler runs here at the latest
    except KeyboardInterrupt:
        pass  # what a C extension's module init can do to it


def test_after_a_swallowed_ctrl_c_no_file_is_renamed_onto_its_final_name(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    staged = StagedFile(tmp_path / "meta.json")
    staged.write(b"{}")
    with interrupt.recorded():
        swallowed_ctrl_c()  # the build goes on
        with pytest.raises(KeyboardInterrupt):
            staged.commit()
    staged.discard()
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGINT) is before  # the handler that was there is back


def test_outside_a_command_check_does_nothing(tmp_path):
    with interrupt.recorded():
        pass
    staged = StagedFile(tmp_path / "meta.json")
    staged.write(b"{}")
    assert staged.commit().read_bytes() == b"{}"
