"""EncodeWorkers: batches encoded in worker processes come back in input order, errors come back too; the
workers are started without the main module unless what they are sent needs it."""

from __future__ import annotations

import sys
import types

import pytest

from niels_gpt.pretrain.encode import encode_documents
from niels_gpt.token_files import pack_tokens
from niels_gpt.tokenizer.workers import (
    AHEAD_PER_WORKER,
    EncodeWorkers,
    available_cpus,
    refers_to_main,
    resolve_workers,
)
from tests.support.corpus import tiny_corpus


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_back_in_input_order(tiny_tokenizer, workers):
    texts = tiny_corpus(90, seed=4)
    batches = [texts[i : i + 1 + i % 7] for i in range(0, len(texts), 5)]  # uneven sizes: uneven finishing
    got = list(EncodeWorkers(tiny_tokenizer, workers).map(encode_documents, batches))
    want = [(tiny_tokenizer.encode_batch(b), b) for b in batches]
    assert len(got) == len(want)
    for (flat, lens), (ids, _) in zip(got, want):
        assert lens == [len(d) for d in ids]
        assert flat.tolist() == [t for d in ids if d for t in [*d, tiny_tokenizer.eot_id]]


def test_input_is_read_only_a_few_batches_ahead(tiny_tokenizer):
    pulled = []

    def batches():
        for i in range(40):
            pulled.append(i)
            yield [f"document number {i}"]

    with EncodeWorkers(tiny_tokenizer, 2) as workers:
        results = workers.map(encode_documents, batches())
        next(results)
        assert len(pulled) <= AHEAD_PER_WORKER * 2 + 1


def test_an_error_in_a_worker_is_raised_in_the_caller(tiny_tokenizer):
    with EncodeWorkers(tiny_tokenizer, 2) as workers, pytest.raises(TypeError, match="must be str or bytes"):
        list(workers.map(encode_documents, [["fine"], [None], ["fine"]]))


def test_one_worker_encodes_in_this_process(tiny_tokenizer):
    seen = []

    def record(tokenizer, batch):  # a closure: it could not be sent to another process
        seen.append(batch)
        return tokenizer.encode_batch(batch)

    workers = EncodeWorkers(tiny_tokenizer, 1)
    assert list(workers.map(record, [["a b"], ["c"]])) == [
        tiny_tokenizer.encode_batch(["a b"]),
        [tiny_tokenizer.encode("c")],
    ]
    assert seen == [["a b"], ["c"]] and workers._pool is None


def test_leaving_the_context_stops_the_workers(tiny_tokenizer):
    with EncodeWorkers(tiny_tokenizer, 2) as workers:
        list(workers.map(encode_documents, [["one"], ["two"]]))
        processes = list(workers._pool._processes.values())
        assert len(processes) == 2
    assert workers._pool is None and not any(p.is_alive() for p in processes)


def test_worker_count(tiny_tokenizer):
    assert resolve_workers(-1) == available_cpus() >= 1 and resolve_workers(3) == 3
    with pytest.raises(ValueError, match=">= 1 or -1"):
        EncodeWorkers(tiny_tokenizer, 0)


def test_pack_tokens_puts_end_after_every_non_empty_list():
    packed = pack_tokens([[5, 65535], [], [7]], end=4)
    assert packed.dtype.str == "<u2" and packed.tolist() == [5, 65535, 4, 7, 4]
    assert pack_tokens([[1, 2], [], [3]]).tolist() == [1, 2, 3] and pack_tokens([]).tolist() == []


def test_refers_to_main_finds_classes_and_functions_of_the_main_module(tiny_tokenizer):
    class ScriptTokenizer:
        pass

    ScriptTokenizer.__module__ = "__main__"
    assert not refers_to_main(tiny_tokenizer, encode_documents)
    assert refers_to_main(ScriptTokenizer()) and refers_to_main([{"fn": ScriptTokenizer}])


def fake_main(monkeypatch, folder, marker) -> types.ModuleType:
    """`__main__` as a script run by path that appends a line to `marker` whenever its top level runs
    and defines a tokenizer class of its own."""
    script = folder / "script.py"
    script.write_text(
        "from niels_gpt.tokenizer import SentencePieceTokenizer\n"
        f"with open({str(marker)!r}, 'a') as f:\n    f.write('ran\\n')\n"
        "class ScriptTokenizer(SentencePieceTokenizer):\n    pass\n"
    )
    main = types.ModuleType("__main__")
    main.__file__, main.__spec__ = str(script), None
    monkeypatch.setitem(sys.modules, "__main__", main)
    exec(compile(script.read_text(), str(script), "exec"), main.__dict__)
    return main


def test_workers_do_not_run_the_main_module(tiny_tokenizer, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    fake_main(monkeypatch, tmp_path, marker)
    with EncodeWorkers(tiny_tokenizer, 2) as workers:
        got = list(workers.map(encode_documents, [["one"], ["two"], ["three"]]))
        assert len(workers._pool._processes) == 2
    assert [lens for _, lens in got] == [[len(tiny_tokenizer.encode(t))] for t in ("one", "two", "three")]
    assert marker.read_text() == "ran\n"  # the fake main's own run, no worker's
    assert sys.modules["__main__"].__file__.endswith("script.py")  # put back after every start


def test_a_tokenizer_class_of_the_main_module_has_the_workers_run_it(tiny_tokenizer_path, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    main = fake_main(monkeypatch, tmp_path, marker)
    tokenizer = main.ScriptTokenizer(tiny_tokenizer_path)
    with EncodeWorkers(tokenizer, 2) as workers:
        got = list(workers.map(encode_documents, [["one"], ["two"], ["three"]]))
        n = len(workers._pool._processes)
    assert [lens for _, lens in got] == [[len(tokenizer.encode(t))] for t in ("one", "two", "three")]
    assert marker.read_text() == "ran\n" * (1 + n)  # each worker ran the script to unpickle the tokenizer
