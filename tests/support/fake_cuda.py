"""The CUDA calls of to_device and prefetch, faked on a machine without a GPU, so their CUDA branch runs.

`FakeCuda(monkeypatch)`: `torch.cuda.is_available()` is True; `Tensor.pin_memory()` returns a copy marked
pinned, and so does `torch.empty(..., pin_memory=True)` (`Tensor.is_pinned()` reads the mark);
`Tensor.to(<a cuda device>, ...)` records (pinned?, non_blocking) in `copies` and returns the tensor unchanged
(still on the CPU, so values can be compared); other `.to` calls run as usual. Streams and events record what
is done with them in `log`, in order: ("record", event, stream), ("wait", event, stream); the stream a
prefetch thread runs under is `side_stream`, the consumer's `torch.cuda.current_stream()` is `main_stream`.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


class FakeStream:
    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def wait_event(self, event) -> None:
        self.log.append(("wait", event, self))

    def __repr__(self) -> str:
        return f"FakeStream({self.name})"


class FakeEvent:
    def __init__(self, log: list):
        self.log = log

    def record(self, stream) -> None:
        self.log.append(("record", self, stream))


class FakeCuda:
    def __init__(self, monkeypatch):
        self.copies: list[tuple[bool, bool]] = []
        self.log: list[tuple] = []
        self.side_stream: FakeStream | None = None
        self.main_stream = FakeStream("main", self.log)
        self.stream_contexts: list[FakeStream] = []
        real_to = torch.Tensor.to

        def to(tensor, *args, **kwargs):
            device = args[0] if args else kwargs.get("device")
            if isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda":
                self.copies.append((tensor.is_pinned(), bool(kwargs.get("non_blocking", False))))
                return tensor
            return real_to(tensor, *args, **kwargs)

        def pin_memory(tensor, *args, **kwargs):
            copy = tensor.clone()
            copy.fake_pinned = True
            return copy

        real_empty = torch.empty

        def empty(*args, pin_memory=False, **kwargs):  # a buffer from the (absent) caching host allocator
            tensor = real_empty(*args, **kwargs)
            if pin_memory:
                tensor.fake_pinned = True
            return tensor

        def new_stream(device=None):
            self.side_stream = FakeStream("side", self.log)
            return self.side_stream

        @contextmanager
        def stream(s):
            self.stream_contexts.append(s)
            yield s

        monkeypatch.setattr(torch, "empty", empty)
        monkeypatch.setattr(torch.Tensor, "to", to)
        monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
        monkeypatch.setattr(torch.Tensor, "is_pinned", lambda tensor: getattr(tensor, "fake_pinned", False))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "Stream", new_stream)
        monkeypatch.setattr(torch.cuda, "stream", stream)
        monkeypatch.setattr(torch.cuda, "Event", lambda: FakeEvent(self.log))
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: self.main_stream)

    def all_pinned_and_non_blocking(self) -> bool:
        return bool(self.copies) and all(pinned and non_blocking for pinned, non_blocking in self.copies)
