"""Packed SFT rows: whole examples placed side by side in rows of W = T+1 tokens, best-fit decreasing.

Input: the kept length of every sampleable example (windows.py: at most W tokens, after its source's
truncation). `pack_examples(lengths, W, seed)` places every example in exactly one row so that a row's
examples sum to at most W tokens, with best-fit decreasing (BFD): examples in decreasing length (ties in
a seeded order: `torch.randperm(n)` from `torch.Generator().manual_seed(seed)`), each into the row with
the least free room that still fits it, or a new row when none does. Rows are numbered in the order
they were opened; inside a row its examples sit in the order they were placed (longest first), from
slot 0 on, with no gap; the rest of the row is padding. The result is a pure function of (lengths, W,
seed): the same cache, T and seed give the same rows in any process.

Speed, without a compiled helper: rows are kept in buckets by free room (0..W), with a count per
bucket in a numpy array. All examples of one length s are placed together: best fit hands them, one
after another, to the row with the least room >= s; that row keeps taking them until its room is
below s (a row with room r takes r // s of them), then the next fullest row does, so a group is the
bucket walk "rows of room s, s+1, ... each taking room // s" (one cumulative sum over the counts finds
where the group ends), then new rows of W // s each. The Python work is one step per bucket a group
touches, never per example; lengths are at most W, so there are at most W groups. Among rows of equal
room the most recently filled one is taken first (ties only decide which examples share a row: the
rooms left are the same whatever the tie order), exactly as the example-by-example rule would.

`PackedRows` stores the result as offsets (CSR): row r holds `examples[start[r]:start[r + 1]]` (indices
into the sampleable examples) at slots `offsets[...]`. For reading, `row_pieces` cuts every row once,
at init, into runs of consecutive slots that read consecutive tokens: each example's one or two kept
segments (placed with windows.kept_positions, the one definition of which token an example keeps
where) and the row's padding; `slot_map(pieces, ids, W)` then lays out rows `ids` with one np.repeat
per array: the token behind every slot, whether it holds one, the example's number in its row (1..k;
0 = padding), the slot's position inside its example (the padding counts from 0 again) and where each
example begins. Memory: about 60 bytes per example (its place, its pieces), next to the dataset's
one byte per token of loss mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from niels_gpt.sft.windows import Segments, kept_positions


@dataclass(frozen=True)
class PackedRows:
    """Row r holds sampleable examples `examples[start[r]:start[r+1]]` at row slots `offsets[...]`."""

    start: np.ndarray  # int64 (rows + 1,)
    examples: np.ndarray  # int64 (examples,): example indices, row by row, in placement order
    offsets: np.ndarray  # int64 (examples,): the slot where each example begins in its row

    def __len__(self) -> int:
        return len(self.start) - 1

    def used(self, lengths: np.ndarray) -> np.ndarray:
        """Tokens (non-padding slots) of every row, given the examples' kept lengths."""
        return np.add.reduceat(lengths[self.examples], self.start[:-1]) if len(self) else np.zeros(0, np.int64)


def _placement_order(lengths: np.ndarray, seed: int) -> np.ndarray:
    """Example indices by decreasing length, ties in a seeded random order (torch.randperm)."""
    import torch

    tie = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(seed)).numpy()
    return np.lexsort((tie, -lengths))


class _Rooms:
    """Rows bucketed by free room: `rows_with[r]` lists the rows with room r, `count[r]` how many."""

    def __init__(self, width: int):
        self.width = width
        self.rows_with: list[list[int]] = [[] for _ in range(width + 1)]
        self.count = np.zeros(width + 1, dtype=np.int64)
        self.num_rows = 0

    def take(self, room: int, k: int) -> list[int]:
        """Remove and return the k most recently added rows of room `room`, the most recent first."""
        bucket = self.rows_with[room]
        taken = bucket[len(bucket) - k :][::-1]
        del bucket[len(bucket) - k :]
        self.count[room] -= k
        return taken

    def put(self, rows: list[int], room: int) -> None:
        self.rows_with[room].extend(rows)
        self.count[room] += len(rows)

    def open(self, k: int) -> list[int]:
        rows = list(range(self.num_rows, self.num_rows + k))
        self.num_rows += k
        return rows


def _place_group(rooms: _Rooms, s: int, m: int) -> tuple[list[int], list[int]]:
    """Best fit for m examples of length s: (rows, how many of the examples each takes), in order."""
    fitting = np.flatnonzero(rooms.count[s:]) + s  # rooms that fit s and have rows, ascending
    enough = np.cumsum(rooms.count[fitting] * (fitting // s)) >= m  # a row with room r takes r // s of them
    last = int(np.argmax(enough)) if enough.any() else len(fitting) - 1  # the bucket where the group runs out
    rows, takes, left = [], [], m
    for room in fitting[: last + 1].tolist():
        q = room // s
        full = min(int(rooms.count[room]), left // q)
        if full:
            taken = rooms.take(room, full)
            rows += taken
            takes += [q] * full
            rooms.put(taken, room - q * s)
            left -= q * full
        if 0 < left < q and rooms.count[room]:  # the last row used takes fewer than it could
            (row,) = rooms.take(room, 1)
            rows.append(row)
            takes.append(left)
            rooms.put([row], room - left * s)
            left = 0
        if not left:
            return rows, takes
    q = rooms.width // s  # every fitting row is now too full: new rows, q examples each
    new_full, rest = divmod(left, q)
    opened = rooms.open(new_full + (rest > 0))
    rooms.put(opened[:new_full], rooms.width - q * s)
    if rest:
        rooms.put(opened[new_full:], rooms.width - rest * s)
    return rows + opened, takes + [q] * new_full + [rest] * (rest > 0)


def pack_examples(lengths, width: int, seed: int) -> PackedRows:
    """Best-fit decreasing of examples of `lengths` (each 1..width) into rows of `width` slots."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) and (lengths.min() < 1 or lengths.max() > width):
        raise ValueError(f"example lengths must lie in [1, {width}], got {lengths.min()}..{lengths.max()}")
    order = _placement_order(lengths, seed)
    sorted_lengths = lengths[order]
    bounds = (np.flatnonzero(np.diff(sorted_lengths)) + 1).tolist()  # where the length changes
    group_lo, group_hi = [0, *bounds] if len(order) else [], [*bounds, len(order)] if len(order) else []
    rooms = _Rooms(width)
    row_of_sorted = np.empty(len(order), dtype=np.int64)
    for lo, hi in zip(group_lo, group_hi):
        rows, takes = _place_group(rooms, int(sorted_lengths[lo]), hi - lo)
        row_of_sorted[lo:hi] = np.repeat(np.asarray(rows, dtype=np.int64), takes)
    by_row = np.argsort(row_of_sorted, kind="stable")  # row by row, placement order inside a row
    examples = order[by_row]
    start = np.zeros(rooms.num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of_sorted, minlength=rooms.num_rows), out=start[1:])
    ends = np.cumsum(lengths[examples])
    offsets = ends - lengths[examples] - np.repeat(ends[start[:-1]] - lengths[examples[start[:-1]]], np.diff(start))
    return PackedRows(start=start, examples=examples, offsets=offsets)


@dataclass(frozen=True)
class RowPieces:
    """Every packed row as runs of slots ("pieces") in slot order, CSR by row: row r is pieces
    `start[r]:start[r+1]`. A piece is one kept segment of an example (windows.py: an example has one or
    two) or the row's padding; pieces of length 0 are left out. Per piece: `length` slots; `shift` =
    token position - slot (consecutive slots read consecutive tokens; 0 on padding); `begin` the slot
    where its example (or the padding) begins; `segment` the example's number in its row, 1..k, 0 for
    the padding; `opens` whether it is the first piece of an example; `x_length` its slots among the
    first T of the row (the length, one less for the last piece of a row: that slot is only a target)."""

    start: np.ndarray
    length: np.ndarray
    x_length: np.ndarray
    shift: np.ndarray
    begin: np.ndarray
    segment: np.ndarray
    opens: np.ndarray


def row_pieces(packed: PackedRows, seg: Segments, width: int) -> RowPieces:
    """The pieces of every row of `packed`, from the kept segments `seg` of the packed examples."""
    n, rows = len(packed.examples), len(packed)
    ex, begin = packed.examples, packed.offsets
    used = packed.used(seg.len1 + seg.len2)
    k = np.arange(n, dtype=np.int64) - np.repeat(packed.start[:-1], np.diff(packed.start))  # place in its row
    # slot order: example j (row by row) -> pieces 2j + row, 2j + 1 + row; each row's padding after them
    row = np.repeat(np.arange(rows, dtype=np.int64), np.diff(packed.start))
    one, two, pad = 2 * np.arange(n) + row, 2 * np.arange(n) + 1 + row, 2 * packed.start[1:] + np.arange(rows)
    length, shift, first = (np.zeros(2 * n + rows, dtype=np.int64) for _ in range(3))
    segment, opens = np.zeros(2 * n + rows, dtype=np.int32), np.zeros(2 * n + rows, dtype=bool)
    length[one], length[two], length[pad] = seg.len1[ex], seg.len2[ex], width - used
    # a piece's first token is the example's kept token j = 0 (first segment) or j = len1 (second)
    shift[one] = kept_positions(seg, ex, 0) - begin
    shift[two] = kept_positions(seg, ex, seg.len1[ex]) - seg.len1[ex] - begin
    first[one], first[two], first[pad] = begin, begin, used
    segment[one], segment[two], opens[one] = k + 1, k + 1, True
    keep = length > 0
    owner = np.repeat(np.arange(rows, dtype=np.int64), 2 * np.diff(packed.start) + 1)[keep]  # row of each piece
    start = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=rows), out=start[1:])
    x_length = length[keep]
    x_length[start[1:] - 1] -= 1
    return RowPieces(start, length[keep], x_length, shift[keep], first[keep], segment[keep], opens[keep])


@dataclass(frozen=True)
class SlotMap:
    """Packed rows laid out slot by slot: over the W = T+1 slots of a row (len(ids), W) `positions` the
    token behind every slot (0 on padding) and `valid` whether a slot holds a token; over the T slots of
    x (len(ids), T) `segment_ids` (int32) the slot's example number in its row (1..k; 0 = padding) and
    `position_ids` the slot's position inside its example (or inside the padding); `firsts` the flat
    index (row * W + slot) of every example's first slot."""

    positions: np.ndarray
    valid: np.ndarray
    segment_ids: np.ndarray
    position_ids: np.ndarray
    firsts: np.ndarray


def slot_map(pieces: RowPieces, ids, width: int) -> SlotMap:
    """The slots of packed rows `ids` (int64 array-like of row numbers): their pieces in order, then one
    np.repeat per array over the slots (a slot's token is its slot plus its piece's shift, its position
    in its example its slot minus the example's first); x's arrays leave out each row's last slot."""
    ids = np.asarray(ids, dtype=np.int64)
    B = len(ids)
    first, count = pieces.start[ids], pieces.start[ids + 1] - pieces.start[ids]
    ends = np.cumsum(count)
    at = np.repeat(first - (ends - count), count) + np.arange(int(ends[-1]) if B else 0, dtype=np.int64)
    length, in_x, begin = pieces.length[at], pieces.x_length[at], pieces.begin[at]
    slot = np.arange(width, dtype=np.int64)
    valid = np.repeat(pieces.segment[at] > 0, length).reshape(B, width)
    positions = np.repeat(pieces.shift[at], length).reshape(B, width)
    positions += slot
    positions *= valid  # padding reads token 0 (its value is replaced)
    segment_ids = np.repeat(pieces.segment[at], in_x).reshape(B, width - 1)
    position_ids = np.repeat(begin, in_x).reshape(B, width - 1)
    np.subtract(slot[:-1], position_ids, out=position_ids)
    opens = pieces.opens[at]
    firsts = np.repeat(np.arange(B, dtype=np.int64) * width, count)[opens] + begin[opens]
    return SlotMap(positions, valid, segment_ids, position_ids, firsts)
