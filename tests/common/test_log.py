"""niels_gpt.log: a milestone is one flushed line on stderr; a progress bar is drawn only on a terminal."""

from __future__ import annotations

import io

import pytest

from niels_gpt.log import log, progress


class Stream(io.StringIO):
    """A stderr stand-in that counts flushes and says whether it is a terminal."""

    def __init__(self, tty: bool = False):
        super().__init__()
        self.tty, self.flushes = tty, 0

    def isatty(self) -> bool:
        super().isatty()  # ValueError once closed, as a real stream
        return self.tty

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_a_milestone_is_one_line_on_stderr_and_nothing_on_stdout(capsys):
    log("train: 1,234 tokens in 1 shard")
    log("val: 56 tokens in 1 shard")
    out, err = capsys.readouterr()
    assert out == "" and err == "train: 1,234 tokens in 1 shard\nval: 56 tokens in 1 shard\n"


def test_a_milestone_is_flushed_at_once(monkeypatch):
    stream = Stream()
    monkeypatch.setattr("sys.stderr", stream)
    log("done")
    assert stream.getvalue() == "done\n" and stream.flushes >= 1


def test_no_bar_is_drawn_when_stderr_is_not_a_terminal(monkeypatch):
    stream = Stream(tty=False)
    monkeypatch.setattr("sys.stderr", stream)
    with progress(total=3, desc="encoding") as bar:
        bar.update(3)
        assert bar.disable
    assert stream.getvalue() == ""


@pytest.mark.parametrize("dynamic_ncols", [None, False])
def test_a_bar_is_drawn_on_a_terminal_stderr_with_the_given_settings(monkeypatch, dynamic_ncols):
    # stdout replaced here too, not read through capsys: monkeypatch set up before capsys is torn down after
    # it, and put capsys' closed stream back as sys.stderr (under -s, every later test saw a closed stderr)
    stream, stdout = Stream(tty=True), io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr("sys.stdout", stdout)
    settings = {} if dynamic_ncols is None else {"dynamic_ncols": dynamic_ncols}
    with progress(total=3, desc="encoding", unit="doc", **settings) as bar:
        bar.update(3)
        drawn = not bar.disable  # closing a bar disables it
    assert drawn and "encoding: 100%" in stream.getvalue() and "3/3" in stream.getvalue()
    assert "doc/s" in stream.getvalue() and stdout.getvalue() == ""
    assert bool(bar.dynamic_ncols) == (dynamic_ncols is None)  # on by default, the caller may turn it off


@pytest.mark.parametrize("state", ["closed", "missing"])
def test_a_closed_or_missing_stderr_gets_no_bar_and_no_error(monkeypatch, state):
    stream = Stream(tty=True)
    stream.close()  # isatty() on a closed file: ValueError
    monkeypatch.setattr("sys.stderr", stream if state == "closed" else None)
    with progress(total=3, desc="encoding") as bar:
        bar.update(3)
        assert bar.disable
