"""`report-figures`: every family writes valid, reproducible SVG showing its caches."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.layout import REPORT_FIGURES
from niels_gpt.report.plotting import SMALL_POINTS, count, pct

SVG = "{http://www.w3.org/2000/svg}"


def draw_all(cache, out_dir) -> dict[str, bytes]:
    assert run_cli(main, ["leakage", "--set", f"cache_dir={cache}"]) == 0
    for family in REPORT_FIGURES:
        assert (
            run_cli(
                main, ["report-figures", "--family", family, "--set", f"cache_dir={cache}", "--out-dir", str(out_dir)]
            )
            == 0
        )
    return {p.name: p.read_bytes() for p in sorted(out_dir.iterdir())}


@pytest.fixture(scope="module")
def drawn(planted_tree, tmp_path_factory):
    return draw_all(planted_tree, tmp_path_factory.mktemp("out"))


def svg_text(data: bytes) -> str:
    root = ET.fromstring(data)
    assert root.tag == f"{SVG}svg"
    return " ".join(t for el in root.iter(f"{SVG}text") for t in el.itertext())


def test_every_family_writes_its_files_and_each_svg_is_a_valid_image(drawn):
    assert set(drawn) == {name for names in REPORT_FIGURES.values() for name in names}
    for name, data in drawn.items():
        if name.endswith(".svg"):
            svg_text(data)  # parses as SVG, with text kept as text


def test_figures_are_byte_identical_when_drawn_again(planted_tree, drawn, tmp_path):
    assert draw_all(planted_tree, tmp_path) == drawn


def test_figures_show_the_caches_numbers(planted_tree, drawn):
    tokens = svg_text(drawn["pretrain_tokens.svg"])
    meta = json.loads((planted_tree / "pretrain" / "wikitext" / "meta.json").read_text())
    assert "wikitext" in tokens and count(meta["train_tokens"]) in tokens and count(meta["val_tokens"]) in tokens
    assert "pretrain/fineweb_edu: not built" in tokens
    assert "T_max + 1" in svg_text(drawn["sft_lengths.svg"])
    assert "sft.mix weight" in svg_text(drawn["sft_mix.svg"])
    assert "sft/primer" in svg_text(drawn["tokenizer_bytes_per_token.svg"])
    assert "streams.p_train" in svg_text(drawn["streams_mix.svg"])
    heatmap = svg_text(drawn["leakage.svg"])
    assert "pretrain/wikitext val" in heatmap and "pretrain/roam train" in heatmap


@pytest.mark.parametrize(
    "family, figure, key, weights",
    [
        ("sft", "sft_mix.svg", "sft.mix", {"primer": 0.37, "oasst1": 0.41, "dolly15k": 0.22}),
        ("streams", "streams_mix.svg", "streams.p_train", {"wiki": 0.53, "roam": 0.29, "primer": 0.18}),
    ],
)
def test_mixture_figures_show_the_configured_weights(planted_tree, tmp_path, family, figure, key, weights):
    setting = "{" + ", ".join(f"{k}: {v}" for k, v in weights.items()) + "}"
    args = ["report-figures", "--family", family, "--set", f"cache_dir={planted_tree}", "--out-dir", str(tmp_path)]
    assert run_cli(main, [*args, "--set", f"{key}={setting}"]) == 0
    text = svg_text((tmp_path / figure).read_bytes())
    assert all(pct(w) in text for w in weights.values()), text


def test_no_text_is_smaller_than_9_points(drawn):
    """SVG user units are points (72 per inch): a text's font-size in px is its size in points. (Log-axis
    ticks, 10^k, are math text in parts, its exponent smaller by design: left out.)"""
    for name, data in drawn.items():
        if name.endswith(".svg"):
            styles = [el.get("style", "") for el in ET.fromstring(data).iter(f"{SVG}text")]
            sizes = [float(m.group(1)) for style in styles if (m := re.search(r"font-size: ([\d.]+)px", style))]
            assert sizes and min(sizes) >= SMALL_POINTS == 9, (name, sorted(set(sizes)))


def test_no_percentage_axis_runs_past_100_percent(drawn):
    ticks = {name: svg_text(drawn[name]) for name in ("sft_mix.svg", "sft_supervision.svg", "tokenizer_vocab_use.svg")}
    for name, text in ticks.items():
        assert re.findall(r"\b(\d+)%", text) and not [t for t in re.findall(r"\b(\d+)%", text) if int(t) > 100], name
    assert "100%" in ticks["tokenizer_vocab_use.svg"]  # vocabulary use: the whole vocabulary is the scale
