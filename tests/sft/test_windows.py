"""niels_gpt.sft.windows against a plain example-by-example reading of its docstring, on random chats.

The reference below keeps, for one example, the token positions the module docstring describes (head,
tail, prompt), with the cut reason and the drop reason; the vectorized module must agree with it on
every example, for many row widths, and whatever its chunk size.
"""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.sft import windows
from niels_gpt.sft.windows import (
    CUT_REASONS,
    DROP_REASONS,
    drop_codes,
    format_reasons,
    kept_positions,
    kept_segments,
    reason_counts,
    row_positions,
)

ROLE, CONTENT, EOT = 1, 2, 3  # token values do not matter to the windows, only the loss mask does


def random_examples(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """`n` rendered examples back to back: (tokens, loss mask, starts, lengths). Each message is [role,
    content..., eot]; assistant content and its eot are loss-active. Some examples have no assistant
    message, some open with one, contents may be empty or long."""
    rng = np.random.default_rng(seed)
    tokens, mask, starts, lengths = [], [], [], []
    for _ in range(n):
        starts.append(len(tokens))
        n_messages = int(rng.integers(1, 7))
        no_reply = rng.random() < 0.1
        for k in range(n_messages):
            role = "user" if no_reply else rng.choice(["system", "user", "assistant"], p=[0.15, 0.45, 0.4])
            if k == n_messages - 1 and not no_reply and rng.random() < 0.7:
                role = "assistant"
            size = int(rng.choice([0, 1, 2, 5, 9, 30]))
            tokens += [ROLE, *[CONTENT] * size, EOT]
            mask += [False, *[role == "assistant"] * (size + 1)]
        lengths.append(len(tokens) - starts[-1])
    return np.array(tokens, dtype=np.uint16), np.array(mask, dtype=bool), starts, lengths


def reference(mask: np.ndarray, start: int, n: int, W: int, truncation: str) -> tuple[list[int], int, int]:
    """(kept token positions, cut code, drop code) of one example, as the module docstring defines them."""
    m = mask[start : start + n]
    runs = [i for i in range(n) if m[i] and (i == 0 or not m[i - 1])]  # reply content starts
    cut = 0
    if n <= W:
        kept = list(range(n))
    elif truncation == "head":
        kept, cut = list(range(W)), 1
    elif truncation == "tail":
        kept, cut = list(range(n - W, n)), 1
    elif not runs:
        kept = list(range(W))  # nothing to keep a reply of: dropped below
    else:
        reply = runs[-1] - 1  # the asst token of the final reply
        end = next((i for i in range(runs[-1], n) if not m[i]), n)
        R, L = end - reply, reply
        P = max(W - R, 0)
        if R > W:
            kept, cut = list(range(reply, reply + W)), 2
        elif L <= P:
            kept, cut = list(range(end)), 1
        else:
            h = min(P // 2, runs[0] - 1)  # the opening: everything before the first reply
            kept, cut = list(range(h)) + list(range(reply - (P - h), end)), 1
    targets = [k for k, p in enumerate(kept) if k >= 1 and m[p]]
    drop = 0 if targets else (1 if not m.any() else 2)
    return [start + p for p in kept], cut, drop


def module_positions(seg, e: int) -> list[int]:
    n = int(seg.len1[e] + seg.len2[e])
    return kept_positions(seg, e, np.arange(n)).tolist()


@pytest.mark.parametrize("truncation", ["head", "tail", "prompt"])
@pytest.mark.parametrize("W", [3, 4, 7, 12, 20, 41])
def test_every_example_keeps_what_the_docstring_says(truncation, W):
    tokens, mask, starts, lengths = random_examples(400, seed=W)
    seg = kept_segments(mask, starts, lengths, W - 1, truncation)
    drops = drop_codes(mask, starts, lengths, seg)
    assert seg.cut.dtype == drops.dtype == np.int8
    for e, (s, n) in enumerate(zip(starts, lengths)):
        want, cut, drop = reference(mask, s, n, W, truncation)
        assert module_positions(seg, e) == want, (e, s, n)
        assert (int(seg.cut[e]), int(drops[e])) == (cut, drop), (e, s, n)
        assert seg.len2[e] == 0 or seg.len1[e] > 0, "a second segment never stands alone"
        if seg.len2[e] == 0:
            assert seg.lo2[e] == seg.lo1[e] + seg.len1[e]


def test_the_cases_are_all_exercised():
    """The random examples reach every cut reason and every drop reason at some width."""
    tokens, mask, starts, lengths = random_examples(400, seed=7)
    cuts, drops = set(), set()
    for W in (3, 7, 12):
        for truncation in ("head", "prompt"):
            seg = kept_segments(mask, starts, lengths, W - 1, truncation)
            cuts |= {(truncation, int(c)) for c in seg.cut}
            drops |= set(drop_codes(mask, starts, lengths, seg).tolist())
    assert {("prompt", k + 1) for k in range(len(CUT_REASONS["prompt"]))} <= cuts
    assert set(range(len(DROP_REASONS) + 1)) <= drops


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_the_chunked_mask_passes_change_nothing(monkeypatch, chunk):
    tokens, mask, starts, lengths = random_examples(300, seed=3)
    whole = kept_segments(mask, starts, lengths, 15, "prompt")
    whole_drops = drop_codes(mask, starts, lengths, whole)
    monkeypatch.setattr(windows, "_CHUNK", chunk)
    chunked = kept_segments(mask, starts, lengths, 15, "prompt")
    for a, b in zip(vars(whole).values(), vars(chunked).values()):
        assert np.array_equal(a, b)
    assert np.array_equal(drop_codes(mask, starts, lengths, chunked), whole_drops)


def test_a_mask_with_no_reply_at_all_gives_head_windows_all_dropped():
    mask = np.zeros(30, dtype=bool)
    seg = kept_segments(mask, [0, 10], [10, 20], 7, "prompt")
    assert seg.lo1.tolist() == [0, 10] and seg.len1.tolist() == [8, 8] and seg.len2.tolist() == [0, 0]
    assert seg.cut.tolist() == [0, 0] and seg.cut.dtype == np.int8
    assert drop_codes(mask, [0, 10], [10, 20], seg).tolist() == [1, 1]


def test_row_positions_read_the_kept_tokens_then_padding():
    tokens, mask, starts, lengths = random_examples(200, seed=11)
    seg = kept_segments(mask, starts, lengths, 9, "prompt")
    pos, valid = row_positions(seg, 10)
    assert (pos.dtype, valid.dtype) == (np.int64, np.bool_)
    for e in range(len(starts)):
        kept = module_positions(seg, e)
        assert pos[e, : len(kept)].tolist() == kept and valid[e].tolist() == [k < len(kept) for k in range(10)]
        assert not pos[e, len(kept) :].any()


def test_an_example_without_a_reply_between_two_with_one_is_kept_as_its_head():
    """Its last run before its end belongs to the previous example: it has no reply of its own."""
    #            ex 0: user, asst "a b"       ex 1: user "x x x x"    ex 2: user, asst "c"
    mask = np.array([0, 0, 0, 1, 1, 1] + [0] * 6 + [0, 0, 0, 1, 1], dtype=bool)
    starts, lengths = [0, 6, 12], [6, 6, 5]
    seg = kept_segments(mask, starts, lengths, 3, "prompt")
    assert (seg.lo1[1], seg.len1[1], seg.len2[1], seg.cut[1]) == (6, 4, 0, 0)
    assert drop_codes(mask, starts, lengths, seg).tolist() == [0, 1, 0]


def test_an_unknown_truncation_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"^truncation must be one of \('head', 'tail', 'prompt'\), got 'middle'$"):
        kept_segments(np.zeros(4, dtype=bool), [0], [4], 3, "middle")


def test_reason_counts_and_their_text():
    codes = np.array([0, 2, 1, 2, 0, 2], dtype=np.int8)
    counts = reason_counts(codes, DROP_REASONS)
    assert counts == {"no_assistant_reply": 1, "no_target_in_window": 3}
    assert format_reasons(counts) == "4 (no_assistant_reply 1, no_target_in_window 3)"
    assert format_reasons({"prompt": 1_234, "reply": 0}) == "1,234 (prompt 1,234)"
    assert format_reasons(reason_counts(np.zeros(3, dtype=np.int8), CUT_REASONS["prompt"])) == "0"
