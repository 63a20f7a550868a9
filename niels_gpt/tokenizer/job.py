"""Build the tokenizer artifact, `{cache_dir}/tokenizer/spm.model` + `meta.json`, from the configuration.

Either trains SentencePiece on a seeded, size-capped sample of the enabled pretrain sources
(`tokenizer.sample_chars` split evenly between them, each source's train side in its seeded
order), or adopts an existing model (`tokenizer.model_path`). The model is written atomically
(niels_gpt.atomic), and a previous build is taken down first (`meta.unpublish`: meta.json first).
meta.json is written last: the common header (`niels_gpt.meta.header`: kind "tokenizer", with the
model's own sha256, vocab size, special ids and eot id; `dataset_name` names the sources sampled, or
the adopted file), the id layout and exactly what the model was trained on. Every cache built later
carries that sha256, so a cache and a tokenizer can never be mixed up silently.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from niels_gpt.atomic import atomic_open
from niels_gpt.data.registry import PRETRAIN_SOURCES
from niels_gpt.layout import META, TOKENIZER_FORMAT_VERSION, TOKENIZER_MODEL
from niels_gpt.log import log, progress
from niels_gpt.meta import header, unpublish, write_meta
from niels_gpt.special_tokens import SPECIAL_TOKENS
from niels_gpt.token_files import MAX_VOCAB


def _capped(texts: Iterator[str], cap: int, stats: dict) -> Iterator[str]:
    """Yield texts until `cap` characters; the text that crosses the cap is cut."""
    for text in texts:
        room = cap - stats["chars"]
        if room <= 0:
            return
        text = text[:room]
        stats["docs"] += 1
        stats["chars"] += len(text)
        yield text


def tokenizer_sources(cfg: dict) -> list[str]:
    return [s for s in PRETRAIN_SOURCES if cfg["sources"][s]["enabled"]]


def _sample(cfg: dict, sources: list[str], stats: dict[str, dict]) -> Iterator[str]:
    """The training texts, source after source; a progress bar counts characters read (SentencePiece
    reads them all first, then trains without further output)."""
    from niels_gpt.data.registry import tokenizer_texts

    cap = cfg["tokenizer"]["sample_chars"] // len(sources)
    with progress(total=cap * len(sources), desc="tokenizer sample", unit="char", unit_scale=True) as bar:
        for source in sources:
            stats[source] = {"docs": 0, "chars": 0}
            for text in _capped(tokenizer_texts(cfg, source, provenance=stats[source]), cap, stats[source]):
                bar.update(len(text))
                yield text


def _adopt(src: Path, model_path: Path):
    """Copy an existing model in; refuse (and remove the copy) if it lacks the control specials."""
    from niels_gpt.tokenizer import SentencePieceTokenizer

    if not src.is_file():
        raise FileNotFoundError(
            f"tokenizer.model_path: {src} does not exist (set it to a .model file or null to train one)"
        )
    with open(src, "rb") as fin, atomic_open(model_path, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    try:
        return SentencePieceTokenizer(model_path), {"adopted_from": str(src)}, str(src)
    except ValueError:
        model_path.unlink(missing_ok=True)
        raise


def _train(cfg: dict, model_path: Path):
    """Train on the seeded sample of the enabled pretrain sources; returns (tokenizer, what it read, the
    sources sampled)."""
    from niels_gpt.tokenizer import train_sentencepiece

    tcfg = cfg["tokenizer"]
    sources = tokenizer_sources(cfg)
    if not sources:
        raise ValueError("tokenizer: no pretrain source is enabled to sample training text from (sources.*.enabled)")
    stats: dict[str, dict] = {}
    log(f"tokenizer: sampling up to {tcfg['sample_chars']:,} chars from {', '.join(sources)}")
    tok = train_sentencepiece(
        _sample(cfg, sources, stats),
        model_path,
        vocab_size=tcfg["vocab_size"],
        model_type=tcfg["model_type"],
        character_coverage=tcfg["character_coverage"],
        num_threads=tcfg["num_threads"],
    )
    trained_on = {
        "sources": stats,
        "total_chars": sum(s["chars"] for s in stats.values()),
        "sample_chars_cap": tcfg["sample_chars"],
        "demo": cfg["demo"],
        "seed": cfg["seed"],
    }
    return tok, trained_on, ", ".join(sources)


def build_tokenizer(cfg: dict, out_dir: str | os.PathLike) -> dict:
    """Train (or adopt) the tokenizer into `out_dir`; returns the meta it wrote."""
    tcfg = cfg["tokenizer"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path = out_dir / TOKENIZER_MODEL
    unpublish(out_dir / META, [model_path])
    started = time.time()
    if tcfg["model_path"]:
        tok, trained_on, read = _adopt(Path(tcfg["model_path"]), model_path)
    else:
        tok, trained_on, read = _train(cfg, model_path)
    meta = {
        **header(
            "tokenizer", format_version=TOKENIZER_FORMAT_VERSION, seed=cfg["seed"], tokenizer=tok, dataset_name=read
        ),
        "model_file": TOKENIZER_MODEL,
        "sha256": tok.sha256,
        "ordinary_pieces": tok.vocab_size - len(SPECIAL_TOKENS),
        "max_id_fits_uint16": tok.vocab_size <= MAX_VOCAB,
        "special_tokens": dict(SPECIAL_TOKENS),
        "model_type": tcfg["model_type"],
        "character_coverage": tcfg["character_coverage"],
        "normalization": "identity (loaders apply NFC); byte_fallback; no dummy prefix; \\n and \\t are pieces",
        "trained_on": trained_on,
    }
    write_meta(out_dir / META, meta)
    log(
        f"tokenizer: {tok.vocab_size:,} ids ({meta['ordinary_pieces']:,} ordinary + {len(SPECIAL_TOKENS)} special), "
        f"sha256 {tok.sha256[:16]}..., {time.time() - started:.1f}s -> {model_path}"
    )
    return meta
