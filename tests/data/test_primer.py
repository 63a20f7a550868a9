"""Primer files: strict jsonl validation (one error per rule, "<file>:<line>: ..."), text split."""

from __future__ import annotations

import json

import pytest

from niels_gpt.data.primer import (
    PrimerFormatError,
    load_primer_jsonl,
    load_primer_text,
    split_primer_dialogues,
)

GOOD = {
    "messages": [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
}


def _write(tmp_path, lines, name="primer.jsonl"):
    path = tmp_path / name
    data = b"".join(
        (ln if isinstance(ln, bytes) else (ln if isinstance(ln, str) else json.dumps(ln)).encode()) + b"\n"
        for ln in lines
    )
    path.write_bytes(data)
    return path


def test_valid_file_loads_every_example_in_order(tmp_path):
    path = _write(tmp_path, [GOOD, "", {"messages": [{"role": "assistant", "content": "Cafe\u0301"}]}])
    samples = load_primer_jsonl(path)
    assert len(samples) == 2
    assert [(m.role, m.content) for m in samples[0].messages] == [
        ("system", "be kind"),
        ("user", "hi"),
        ("assistant", "hello"),
    ]
    assert samples[1].messages[0].content == "Caf\u00e9"  # normalized
    assert [s.meta for s in samples] == [{"index": 0, "line": 1}, {"index": 1, "line": 3}]
    assert samples[0].source == "primer"


BAD_CASES = {
    "not_json": ("{messages: [", "not valid JSON"),
    "not_object": ([GOOD["messages"]], "expected a JSON object, got list"),
    "missing_messages": ({"msgs": []}, "missing key 'messages'"),
    "extra_top_key": ({**GOOD, "id": 3}, "unexpected top-level key(s) ['id']"),
    "extra_message_key": (
        {"messages": [{"role": "assistant", "content": "x", "name": "n"}]},
        "messages[0] has unexpected key(s) ['name']",
    ),
    "missing_message_key": ({"messages": [{"role": "assistant"}]}, "messages[0] is missing key(s) ['content']"),
    "unknown_role": (
        {"messages": [{"role": "bot", "content": "x"}]},
        "unknown role 'bot'; allowed: system, user, assistant",
    ),
    "non_string_content": (
        {"messages": [{"role": "assistant", "content": 5}]},
        "messages[0].content must be a string, got int",
    ),
    "empty_list": ({"messages": []}, "'messages' is an empty list"),
    "messages_not_list": ({"messages": "hi"}, "'messages' must be a list"),
    "message_not_object": ({"messages": ["hi"]}, "messages[0] must be an object"),
    "no_assistant": ({"messages": [{"role": "user", "content": "x"}]}, "no assistant message"),
    "not_utf8": (b'{"messages": [{"role": "assistant", "content": "\xff"}]}', "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_each_malformed_line_names_file_line_and_problem(tmp_path, case):
    bad, expected = BAD_CASES[case]
    path = _write(tmp_path, [GOOD, GOOD, bad])
    with pytest.raises(PrimerFormatError) as e:
        load_primer_jsonl(path)
    assert str(e.value).startswith(f"{path}:3: ")
    assert expected in str(e.value)
    assert isinstance(e.value, ValueError)


def test_missing_file_names_the_path_and_the_setting(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl: primer jsonl file not found.*sources\.primer\.jsonl"):
        load_primer_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match=r"nope\.txt: primer text file not found.*sources\.primer\.text"):
        load_primer_text(tmp_path / "nope.txt")


def test_file_without_examples_is_refused(tmp_path):
    with pytest.raises(PrimerFormatError, match=r":1: no examples"):
        load_primer_jsonl(_write(tmp_path, ["", "  "]))


def test_crlf_and_byte_order_mark_are_accepted(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\r\n" + json.dumps(GOOD).encode() + b"\r\n")
    assert len(load_primer_jsonl(path)) == 2


DELIM = "\n\n<dialogue>\n\n"


def test_text_split_holds_out_whole_dialogues_deterministically():
    blocks = [f"user: q{i}\nassistant: a{i}" for i in range(20)]
    text = DELIM.join(blocks)
    train, val = split_primer_dialogues(text, 0.1, 42, DELIM)
    assert (train, val) == split_primer_dialogues(text, 0.1, 42, DELIM)
    tb, vb = train.split(DELIM), val.split(DELIM)
    assert len(vb) == 2 and not set(tb) & set(vb) and sorted(tb + vb) == sorted(blocks)
    assert tb == [b for b in blocks if b in tb]  # file order kept
    assert split_primer_dialogues(text, 0.1, 43, DELIM) != (train, val)


def test_text_split_drops_empty_blocks_and_needs_a_delimiter():
    train, val = split_primer_dialogues(DELIM + "a" + DELIM + "b", 0.0, 1, DELIM)
    assert (train, val) == ("a" + DELIM + "b", "")
    with pytest.raises(ValueError, match=r"delimiter must be a non-empty string \(sources.primer.delimiter\)"):
        split_primer_dialogues("a", 0.1, 1, "")


def test_primer_text_is_normalized_and_utf8_checked(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes("a\r\nCafe\u0301".encode())
    assert load_primer_text(path) == "a\nCaf\u00e9"
    path.write_bytes(b"ok\nbad \xff")
    with pytest.raises(PrimerFormatError, match=r"p\.txt:2: not UTF-8"):
        load_primer_text(path)
