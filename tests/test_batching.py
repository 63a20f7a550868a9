"""Mixed-source byte batches: shapes, values, shift, determinism, errors. The mixture draw itself (shares,
sorted-name order) is niels_gpt.sampling's contract, tested in test_sampling.py; here only that a batch
uses `draw_sources` and then draws positions in the documented order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from niels_gpt.batching import StreamBatcher, default_p_train, get_batch, load_stream_cache
from niels_gpt.sampling import draw_sources
from niels_gpt.streams import write_stream

T, B = 16, 8
P = {"wiki": 0.5, "roam": 0.3, "primer": 0.2}


@pytest.fixture
def sources():
    return {
        "wiki": b"abcdefghijklmnopqrstuvwxyz" * 50,
        "roam": b"0123456789" * 200,
        "primer": b"system: x\nuser: y\nassistant: z\n" * 50,
    }


def test_shapes_dtype_and_bytes_above_127_stay_positive(sources):
    utf8 = {**sources, "primer": "ünïcødé ✓ ".encode() * 20}  # every byte of a multi-byte character is >= 128
    x, y = get_batch(utf8, p={"wiki": 0.0, "roam": 0.0, "primer": 1.0}, B=B, T=T, device="cpu")
    assert x.shape == y.shape == (B, T)
    assert x.dtype == y.dtype == torch.int64
    assert x.is_contiguous() and y.is_contiguous()
    assert int(x.max()) > 127 and int(x.min()) >= 32  # uint8 values, not int8: no negative byte
    assert all(bytes(row) in utf8["primer"] for row in x.tolist())


def test_y_is_x_shifted_by_one(sources):
    x, y = get_batch(sources, p=P, B=64, T=T, device="cpu", generator=torch.Generator().manual_seed(1))
    assert torch.equal(y[:, :-1], x[:, 1:])


def test_every_row_is_a_window_of_its_source(sources):
    x, y = get_batch(sources, p=P, B=64, T=T, device="cpu", generator=torch.Generator().manual_seed(2))
    for xr, yr in zip(x.tolist(), y.tolist()):
        window = bytes(xr + yr[-1:])
        assert sum(window in s for s in sources.values()) == 1


def test_same_generator_state_gives_same_batch(sources):
    x1, y1 = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    x2, y2 = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    x3, _ = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(1))
    assert not torch.equal(x1, x3)


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


def test_probabilities_must_sum_to_one(sources):
    with pytest.raises(ValueError, match="sum to 1"):
        get_batch(sources, p={"wiki": 0.5, "roam": 0.3, "primer": 0.1}, B=B, T=T, device="cpu")


def test_missing_key_in_p_raises(sources):
    with pytest.raises(ValueError, match=r"missing from p: \['primer'\]"):
        get_batch(sources, p={"wiki": 0.5, "roam": 0.5}, B=B, T=T, device="cpu")


def test_extra_key_in_p_raises(sources):
    with pytest.raises(ValueError, match=r"not available: \['books'\]"):
        get_batch(sources, p={**P, "wiki": 0.4, "books": 0.1}, B=B, T=T, device="cpu")


def test_too_short_sources_are_all_listed(sources):
    short = {**sources, "roam": b"0123456789", "primer": b"x" * T}
    with pytest.raises(ValueError) as e:
        get_batch(short, p=P, B=B, T=T, device="cpu")
    msg = str(e.value)
    assert "roam: 10 bytes" in msg and f"primer: {T} bytes" in msg and "wiki" not in msg


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


def test_load_stream_cache_memmaps_and_skips_empty(tmp_path, sources):
    for name, data in sources.items():
        write_stream(tmp_path, name, "train", data, {"source": name, "split": "train"})
    write_stream(tmp_path, "primer", "val", b"", {"source": "primer", "split": "val"})
    loaded = load_stream_cache(tmp_path, "train")
    assert sorted(loaded) == sorted(sources)
    assert all(isinstance(a, np.memmap) and bytes(a) == sources[k] for k, a in loaded.items())
    x, _ = get_batch(loaded, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    x_ref, _ = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    assert torch.equal(x, x_ref)
    assert load_stream_cache(tmp_path, "val") == {}
    with pytest.raises(ValueError, match=r"primer_val.bin: the primer val stream is empty \(no input\)$"):
        load_stream_cache(tmp_path, "val", sources=["primer"])
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
