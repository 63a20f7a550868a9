"""Which tokens of an SFT example a training row keeps: the one definition of truncation.

An SFT cache stores every example whole; a row holds at most W = T+1 of its tokens (x = the first T,
y = the last T). The kept tokens are at most two contiguous segments of the example, in example order:
[lo1, lo1 + len1) then [lo2, lo2 + len2) (absolute token positions; len2 = 0 when one segment is
enough, and then lo2 = lo1 + len1). An example of n <= W tokens is kept whole. A longer one, by mode:

  head    its first W tokens                                                     cut reason "end"
  tail    its last W tokens (the latest turns)                                   cut reason "start"
  prompt  the final assistant reply whole, the prompt side cut                   cut reason "prompt"
          With R the reply's length (its asst token through its eot) and P = W - R the room before it:
          the first h = min(P // 2, opening) tokens of the example (opening = everything before the
          first assistant reply: the system and first user messages), then the last P - h tokens
          before the reply, then the reply. So the middle of a long user message or context is cut,
          or, in a long conversation, the oldest turns after the opening. Messages after the final
          reply are not kept. A reply longer than W keeps its first W tokens      cut reason "reply"

Assistant replies are found from the loss mask alone: a reply is a run of loss-active tokens (its
content and eot) and starts at the asst role token just before the run. The writer has the mask from
render_chat_sft's labels, the dataset from `loss_mask_from_tokens`; they are equal.

Row position 0 is never a target, so an example is usable only if a loss-active token is kept at row
positions 1..W-1. Otherwise it is dropped, with a reason: "no_assistant_reply" (the example has no
loss-active token at all) or "no_target_in_window" (head or tail truncation kept none; prompt
truncation always keeps the final reply's eot). The SFT writer drops (for its T_max), the dataset
excludes (for its T), and `info` counts cuts: all through `kept_segments` and `drop_codes`, so they agree.
Where the j-th kept token of an example sits in the file is `kept_positions`: padded rows read it
through `row_positions`, packed rows (packing.py) through their pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TRUNCATIONS = ("head", "tail", "prompt")
CUT_REASONS = {"head": ("end",), "tail": ("start",), "prompt": ("prompt", "reply")}  # cut code k = reason k-1
DROP_REASONS = ("no_assistant_reply", "no_target_in_window")  # drop code k = reason k-1; 0 = kept
_CHUNK = 1 << 22  # tokens per chunk of the mask passes: bounds the int64 temporaries to 32 MB


def check_truncation(truncation: str) -> None:
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")


@dataclass(frozen=True)
class Segments:
    """Kept tokens per example: [lo1, lo1 + len1) then [lo2, lo2 + len2), int64 arrays; `cut` (int8)
    is 0 for an example kept whole, else 1 + the index of its reason in CUT_REASONS[truncation]."""

    lo1: np.ndarray
    len1: np.ndarray
    lo2: np.ndarray
    len2: np.ndarray
    cut: np.ndarray

    def take(self, ids) -> Segments:
        return Segments(*(a[ids] for a in (self.lo1, self.len1, self.lo2, self.len2, self.cut)))


def _one_segment(lo: np.ndarray, length: np.ndarray, cut: np.ndarray) -> Segments:
    return Segments(lo, length, lo + length, np.zeros_like(length), cut.astype(np.int8))


def kept_segments(mask: np.ndarray, starts, lengths, T: int, truncation: str) -> Segments:
    """The kept segments of every example (examples at `starts` with `lengths` in the token file whose
    loss mask is `mask`) for rows of T+1 tokens."""
    check_truncation(truncation)
    starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    width = np.minimum(lengths, T + 1)
    over = lengths > T + 1
    if truncation == "head":
        return _one_segment(starts, width, over)
    if truncation == "tail":
        return _one_segment(starts + lengths - width, width, over)
    return _prompt_segments(mask, starts, lengths, T + 1)


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of True in `mask`, ends exclusive, in one chunked pass."""
    starts, ends, prev = [], [], False
    for lo in range(0, len(mask), _CHUNK):
        chunk = np.asarray(mask[lo : lo + _CHUNK], dtype=np.int8)
        step = np.diff(chunk, prepend=np.int8(prev))
        starts.append(np.flatnonzero(step == 1) + lo)
        ends.append(np.flatnonzero(step == -1) + lo)
        prev = bool(chunk[-1])
    ends.append(np.array([len(mask)] if prev else [], dtype=np.int64))
    return np.concatenate(starts or [np.zeros(0, np.int64)]), np.concatenate(ends)


def _prompt_segments(mask: np.ndarray, starts: np.ndarray, lengths: np.ndarray, W: int) -> Segments:
    run_start, run_end = _runs(mask)
    if not len(run_start):  # no reply anywhere: head windows (every example is dropped)
        return _one_segment(starts, np.minimum(lengths, W), np.zeros(len(starts)))
    last = np.searchsorted(run_start, starts + lengths, side="left") - 1  # last reply starting in the example
    has = (last >= 0) & (run_start[np.maximum(last, 0)] > starts)
    last = np.maximum(last, 0)
    first = np.minimum(np.searchsorted(run_start, starts, side="left"), len(run_start) - 1)
    reply = np.where(has, run_start[last] - 1, starts)  # the asst token of the final reply
    R = np.where(has, run_end[last], starts) - reply
    P = np.maximum(W - R, 0)  # room for the prompt side
    L = reply - starts  # the prompt side's length
    opening = np.where(has, run_start[first] - 1 - starts, 0)
    h = np.where(L <= P, L + R, np.minimum(P // 2, opening))  # the first segment (all of it when L fits)
    tail = np.where(L <= P, 0, P - h + R)  # the second: the last P - h prompt tokens and the reply
    fits, long_reply = lengths <= W, has & (R > W)
    len1 = np.where(fits, lengths, np.where(long_reply, W, np.where(has, h, np.minimum(lengths, W))))
    lo1 = np.where(long_reply & ~fits, reply, starts)
    len2 = np.where(fits | long_reply | ~has, 0, tail)
    lo2 = np.where(len2 > 0, reply + R - len2, lo1 + len1)
    # a first segment of length 0 (no room for the opening): the second one alone
    empty1 = len1 == 0
    lo1, len1 = np.where(empty1, lo2, lo1), np.where(empty1, len2, len1)
    lo2, len2 = np.where(empty1, lo1 + len1, lo2), np.where(empty1, 0, len2)
    cut = np.where(fits | ~has, 0, np.where(long_reply, 2, 1))
    return Segments(lo1, len1, lo2, len2, cut.astype(np.int8))


def _count_before(mask: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """For each p in `positions`: the number of True values in mask[:p] (chunked cumsum)."""
    positions = np.asarray(positions, dtype=np.int64)
    out = np.zeros(len(positions), dtype=np.int64)
    base = 0
    for lo in range(0, len(mask), _CHUNK):
        hi = min(lo + _CHUNK, len(mask))
        local = np.cumsum(mask[lo:hi], dtype=np.int64)
        sel = (positions > lo) & (positions <= hi)
        out[sel] = base + local[positions[sel] - lo - 1]
        out[positions > hi] = base + local[-1]
        base += int(local[-1])
    return out


def kept_targets(mask: np.ndarray, seg: Segments) -> np.ndarray:
    """Per example: the loss-active tokens kept at row positions 1..W-1 (the targets a row trains on)."""
    end1, end2 = seg.lo1 + seg.len1, seg.lo2 + seg.len2
    c = _count_before(mask, np.concatenate([end1, np.minimum(seg.lo1 + 1, end1), end2, seg.lo2])).reshape(4, -1)
    return (c[0] - c[1]) + (c[2] - c[3])


def drop_codes(mask: np.ndarray, starts, lengths, seg: Segments) -> np.ndarray:
    """Per example: 0 if a loss-active target is kept at row positions 1..W-1, else 1 + the index of the
    reason in DROP_REASONS (no loss-active token at all, or none kept)."""
    starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    total = np.diff(_count_before(mask, np.concatenate([starts, starts + lengths])).reshape(2, -1), axis=0)[0]
    return np.where(kept_targets(mask, seg) > 0, 0, np.where(total == 0, 1, 2)).astype(np.int8)


def reason_counts(codes: np.ndarray, reasons: tuple[str, ...]) -> dict[str, int]:
    """{reason: how many codes name it} (code k = reasons[k-1]; 0 counts nowhere)."""
    counts = np.bincount(np.asarray(codes, dtype=np.int64), minlength=len(reasons) + 1)
    return {reason: int(counts[k + 1]) for k, reason in enumerate(reasons)}


def format_reasons(counts: dict[str, int]) -> str:
    """A count with its reasons, for logs and tables: "12 (prompt 11, reply 1)", or "0"."""
    detail = ", ".join(f"{reason} {n:,}" for reason, n in counts.items() if n)
    return f"{sum(counts.values()):,}" + (f" ({detail})" if detail else "")


def kept_positions(seg: Segments, which, j) -> np.ndarray:
    """The token position of the j-th kept token (0 <= j < len1 + len2) of examples `which` (arrays that
    broadcast): inside the first segment lo1 + j, past it lo2 + (j - len1)."""
    lo1, len1 = seg.lo1[which], seg.len1[which]
    return lo1 + j + np.where(j >= len1, seg.lo2[which] - lo1 - len1, 0)


def row_positions(seg: Segments, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, valid), each (len(seg), width): the token position behind every row slot (0 where the
    row is padding) and whether the slot holds a kept token."""
    t = np.arange(width, dtype=np.int64)[None, :]
    pos = seg.lo1[:, None] + t
    two = np.flatnonzero(seg.len2)  # rows with a second segment (few): kept_positions, which jumps to it
    if len(two):
        pos[two] = kept_positions(seg, two[:, None], t)
    valid = t < (seg.len1 + seg.len2)[:, None]
    return np.where(valid, pos, 0), valid
