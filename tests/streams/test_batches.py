"""streams/batches.py: every row is a window of its source, the documented draw order, buffer types,
`StreamBatcher`, `load_stream_cache` (skips "not built" streams), errors beyond the acceptance test's.
The mixture draw itself (shares, sorted-name order) is niels_gpt.sampling's contract, tested in
tests/common/test_sampling.py; here only that a batch uses `draw_sources` and then draws positions in
the documented order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from niels_gpt.batching import StreamBatcher, default_p_train, get_batch, load_stream_cache
from niels_gpt.sampling import draw_sources
from niels_gpt.streams import write_not_built, write_stream

T, B = 16, 8
P = {"wiki": 0.5, "roam": 0.3, "primer": 0.2}


def test_every_row_is_a_window_of_its_source(sources):
    x, y = get_batch(sources, p=P, B=64, T=T, device="cpu", generator=torch.Generator().manual_seed(2))
    for xr, yr in zip(x.tolist(), y.tolist()):
        window = bytes(xr + yr[-1:])
        assert sum(window in s for s in sources.values()) == 1


def test_dict_order_and_buffer_type_do_not_change_the_batch(sources):
    reordered = {k: np.frombuffer(bytearray(sources[k]), dtype=np.uint8) for k in reversed(list(sources))}
    x1, _ = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(5))
    x2, _ = get_batch(
        reordered, p=dict(reversed(P.items())), B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(5)
    )
    assert torch.equal(x1, x2)


def test_draw_order_is_the_documented_one(sources):
    """sampling.draw_sources, then one randint for every row's start, modulo its window count."""
    g = torch.Generator().manual_seed(3)
    x, _ = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=g)
    g = torch.Generator().manual_seed(3)
    names, idx = draw_sources(P, B, g)
    draws = torch.randint(0, 2**62, (B,), generator=g)
    expected = torch.empty(B, T, dtype=torch.int64)
    for r in range(B):
        src = sources[names[int(idx[r])]]
        s = int(draws[r]) % (len(src) - T)
        expected[r] = torch.tensor(list(src[s : s + T]))
    assert torch.equal(x, expected)


def test_default_p_train_is_the_seed_mixture():
    assert default_p_train() == {"wiki": 0.784, "roam": 0.196, "primer": 0.020}


def test_exactly_t_plus_one_bytes_is_enough():
    x, y = get_batch({"a": b"0123456789"}, p={"a": 1.0}, B=3, T=9, device="cpu")
    assert x.tolist() == [list(b"012345678")] * 3 and y.tolist() == [list(b"123456789")] * 3


def test_batcher_matches_get_batch(sources):
    batcher = StreamBatcher(sources, p=P, T=T)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    for _ in range(3):
        xa, ya = batcher.get_batch(B, g1)
        xb, yb = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=g2)
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_load_stream_cache_memmaps_and_skips_streams_not_built_or_empty(tmp_path, sources):
    from niels_gpt.streams import StreamBuildConfig
    from niels_gpt.streams.build import stream_header

    for name, data in sources.items():
        write_stream(tmp_path, name, "train", data, {"source": name, "split": "train"})
    write_not_built(tmp_path, "primer", "val", reason="no input", header=stream_header(StreamBuildConfig(), "primer"))
    write_stream(tmp_path, "roam", "val", b"", {})
    loaded = load_stream_cache(tmp_path, "train")
    assert sorted(loaded) == sorted(sources)
    assert all(isinstance(a, np.memmap) and bytes(a) == sources[k] for k, a in loaded.items())
    x, _ = get_batch(loaded, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    x_ref, _ = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    assert torch.equal(x, x_ref)
    assert load_stream_cache(tmp_path, "val") == {}
    with pytest.raises(ValueError, match=r"primer_val.bin: the primer val stream is not built \(no input\)$"):
        load_stream_cache(tmp_path, "val", sources=["primer"])
    with pytest.raises(ValueError, match=r"roam_val.bin: the roam val stream is empty$"):
        load_stream_cache(tmp_path, "val", sources=["roam"])
    with pytest.raises(FileNotFoundError, match=r"wiki_val.meta.json: no stream meta - build it with .*--source wiki"):
        load_stream_cache(tmp_path, "val", sources=["wiki"])


def test_every_buffer_type_gives_the_same_batch(sources):
    data = sources["roam"]
    views = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "numpy": np.frombuffer(data, dtype=np.uint8),
        "torch": torch.frombuffer(bytearray(data), dtype=torch.uint8),
        "strided numpy": np.frombuffer(data * 2, dtype=np.uint8)[::2],  # every other byte: data twice as long / 2
    }
    batches = {
        kind: get_batch(
            {"roam": v}, p={"roam": 1.0}, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(4)
        )[0]
        for kind, v in views.items()
    }
    for kind in ("bytearray", "memoryview", "numpy", "torch"):
        assert torch.equal(batches[kind], batches["bytes"]), kind
    for row in batches["strided numpy"].tolist():
        assert bytes(row) in (data * 2)[::2]


def test_bad_source_types_and_sizes_raise(sources):
    with pytest.raises(TypeError, match="wiki: expected bytes"):
        get_batch({**sources, "wiki": "text, not bytes"}, p=P, B=B, T=T, device="cpu")
    with pytest.raises(ValueError, match="wiki: expected a 1-D uint8 array"):
        get_batch({**sources, "wiki": np.zeros(100, dtype=np.int64)}, p=P, B=B, T=T, device="cpu")
    with pytest.raises(ValueError, match="B must be >= 1"):
        get_batch(sources, p=P, B=0, T=T, device="cpu")
    with pytest.raises(ValueError, match="T must be >= 1"):
        get_batch(sources, p=P, B=B, T=0, device="cpu")


def test_without_generator_the_global_torch_rng_decides(sources):
    torch.manual_seed(11)
    x1, _ = get_batch(sources, p=P, B=B, T=T, device="cpu")
    torch.manual_seed(11)
    x2, _ = get_batch(sources, p=P, B=B, T=T, device="cpu")
    assert torch.equal(x1, x2)


def test_new_source_objects_are_never_served_from_the_previous_call():
    a = {"wiki": b"a" * 64, "roam": b"b" * 64}
    b = {"wiki": b"c" * 64, "roam": b"d" * 64}
    p = {"wiki": 0.5, "roam": 0.5}
    get_batch(a, p=p, B=4, T=8, device="cpu", generator=torch.Generator().manual_seed(0))
    x, _ = get_batch(b, p=p, B=64, T=8, device="cpu", generator=torch.Generator().manual_seed(0))
    assert set(x.flatten().tolist()) <= {ord("c"), ord("d")}
    with pytest.raises(ValueError, match="shorter than T"):
        get_batch({"wiki": b"c" * 4, "roam": b"d" * 64}, p=p, B=4, T=8, device="cpu")
