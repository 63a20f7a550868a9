"""Train a tiny GPT on the caches: pretrain on every pretrain cache, then fine-tune on packed SFT rows.

    python examples/train_tiny.py --cache cache --steps 200 --sft-steps 200 [--device cuda --dtype bf16] [--resume]

What it writes goes under --out-dir (default {cache}/runs/train_tiny, inside the git-ignored cache
folder): the checkpoint, {out-dir}/checkpoint.pt unless --checkpoint names another file.

The model (0.1 M parameters plus 64 per vocabulary id: 1.1 M with the 16k tokenizer; --d, --layers,
--heads make it bigger): token + learned position embeddings, pre-norm blocks of causal self-attention
and an MLP, a tied output head. Packed SFT batches bring segment_ids and position_ids: attention stays
inside each example (a token sees only its own example) and the position embeddings take the ids that
restart per example. The mask (--attention): on CUDA a FlexAttention BlockMask built from segment_ids
(compiled flex_attention skips the blocks outside the examples); elsewhere the dense
block_causal_mask through F.scaled_dot_product_attention (torch 2.13's FlexAttention has no backward
pass on the CPU). --dtype bf16 runs forward and loss under bf16 autocast (weights and optimizer stay
float32). The readers put batches on --device (pinned memory, non-blocking copies on CUDA) and a
background thread keeps the next --prefetch batches ready (training.prefetch; 0: none).
Pretraining mixes the built pretrain caches in proportion to their train tokens; fine-tuning mixes
the SFT caches by --sft-mix (y_masked targets, the loader's ignore_index). Both read MixedLoader in
epoch mode; the loss is training.loss.masked_cross_entropy. Every step prints the train loss, the time
of the step and the phase's ETA (from its mean step time so far); val loss (the mean over
--eval-batches fixed batches of the val splits) is printed before each phase, every --eval-every steps
and at its end. The checkpoint (saved every --save-every steps and at the end, each save printed with
its path and step) holds the model, the optimizer, the phase and step, and the loader's state after the
last batch trained on (the prefetcher's state_dict: not after the batches made ahead): --resume
continues with the batches the uninterrupted run would have read (the same losses, on the same device).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from niels_gpt import layout
from niels_gpt.atomic import atomic_open
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.meta import read_meta
from niels_gpt.data.registry import PRETRAIN_SOURCES
from niels_gpt.tokenizer import SentencePieceTokenizer
from niels_gpt.training.attention import block_causal_mask
from niels_gpt.training.loss import masked_cross_entropy
from niels_gpt.training.prefetch import prefetch

ATTENTION = ("auto", "flex", "sdpa")  # auto: flex on CUDA, sdpa elsewhere


def flex_available() -> bool:
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def attention_kind(choice: str, device: str) -> str:
    """The attention of packed rows: "flex" (FlexAttention BlockMask) or "sdpa" (dense block_causal_mask)."""
    on_cuda = torch.device(device).type == "cuda"
    if choice == "auto":
        return "flex" if on_cuda and flex_available() else "sdpa"
    if choice == "flex" and not (on_cuda and flex_available()):
        raise SystemExit(
            f"--attention flex needs CUDA and torch.nn.attention.flex_attention (torch {torch.__version__} on "
            f"{device}: FlexAttention has no backward pass on the CPU); use --attention sdpa"
        )
    return choice


class FlexMask:
    """Packed-row attention through FlexAttention: a BlockMask from segment_ids (a query attends a key of
    its own example, not later), flex_attention compiled once on CUDA (uncompiled it is a slow reference)."""

    def __init__(self, device: str):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        self.create_block_mask = create_block_mask
        self.attend = torch.compile(flex_attention) if torch.device(device).type == "cuda" else flex_attention

    def __call__(self, segment_ids: torch.Tensor):
        B, T = segment_ids.shape

        def same_example(b, h, q_idx, kv_idx):
            return (segment_ids[b, q_idx] == segment_ids[b, kv_idx]) & (kv_idx <= q_idx)

        return self.create_block_mask(same_example, B, None, T, T, device=segment_ids.device)


def attend(q, k, v, mask, flex: FlexMask | None) -> torch.Tensor:
    """Causal self-attention; `mask`: None (causal), a bool (B, 1, T, T) mask (SDPA) or a BlockMask (flex)."""
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if isinstance(mask, torch.Tensor):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return flex.attend(q, k, v, block_mask=mask)


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.ln1, self.ln2 = heads, nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, h: torch.Tensor, mask, flex: FlexMask | None = None) -> torch.Tensor:
        B, T, d = h.shape
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in self.qkv(self.ln1(h)).split(d, dim=2))
        a = attend(q, k, v, mask, flex)
        h = h + self.proj(a.transpose(1, 2).reshape(B, T, d))
        return h + self.mlp(self.ln2(h))


class GPT(nn.Module):
    def __init__(self, vocab: int, T: int, d: int, layers: int, heads: int, attention: str = "sdpa", device="cpu"):
        super().__init__()
        self.flex = FlexMask(device) if attention == "flex" else None
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        for module in self.modules():  # GPT-2's init: small normal weights, zero biases
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, x, segment_ids=None, position_ids=None) -> torch.Tensor:
        """Logits (B, T, vocab); packed rows (segment_ids given) attend only inside their examples."""
        positions = torch.arange(x.shape[1], device=x.device) if position_ids is None else position_ids
        mask = None
        if segment_ids is not None:
            mask = self.flex(segment_ids) if self.flex is not None else block_causal_mask(segment_ids)
        h = self.tok(x) + self.pos(positions)
        for block in self.blocks:
            h = block(h, mask, self.flex)
        return self.head(self.ln(h))


def loss_of(model: GPT, batch, loader: MixedLoader, autocast) -> torch.Tensor:
    with autocast():
        if batch.y_masked is None:  # pretrain: every next token is a target
            return masked_cross_entropy(model(batch.x), batch.y)
        logits = model(batch.x, batch.segment_ids, batch.position_ids)
        return masked_cross_entropy(logits, batch.y_masked, loader.ignore_index)


def autocast_of(args):
    """A context factory: bf16 autocast on args.device for --dtype bf16, else nothing."""
    if args.dtype == "bf16":
        return lambda: torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16)
    return nullcontext


def pretrain_mix(cache: str) -> dict[str, float]:
    """Every built pretrain cache with train and val tokens, weighted by its train tokens."""
    tokens = {}
    for name in PRETRAIN_SOURCES:
        path = Path(layout.pretrain_dir(cache, name)) / layout.META
        meta = read_meta(str(path)) if path.exists() else {"built": False}
        if meta.get("built") and meta.get("train_tokens") and meta.get("val_tokens"):
            tokens[name] = meta["train_tokens"]
    return {name: n / sum(tokens.values()) for name, n in tokens.items()}


def loaders(args, phase: str, tok) -> tuple[MixedLoader, MixedLoader]:
    """(train loader in epoch mode, val loader in random mode: fixed batches via batch_at) of a phase."""
    kw = {"T": args.T, "B": args.B, "seed": args.seed, "device": args.device, "tokenizer": tok}
    if phase == "pretrain":
        make, kw["p"] = MixedLoader.pretrain, pretrain_mix(args.cache)
    else:
        make, kw["p"], kw["packing"] = MixedLoader.sft, json.loads(args.sft_mix), True
    return make(args.cache, "train", mode="epoch", **kw), make(args.cache, "val", **kw)


def batches_of(train: MixedLoader, args):
    """The train batches in a with block: made ahead by a background thread (--prefetch > 0, stopped on
    leaving the block), else read in the loop."""
    return prefetch(train, args.device, depth=args.prefetch) if args.prefetch else nullcontext(train)


def duration(seconds: float) -> str:
    """A wall time as h:mm:ss, or m:ss under an hour."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def step_line(phase: str, step: int, steps: int, loss: float, step_s: float, mean_s: float) -> str:
    """`pretrain step 3/24: train loss 4.123456 | 85 ms/step, ETA 0:02`: the ETA of the rest of the phase
    at its mean step time so far (evaluations and checkpoints not counted)."""
    timing = f"{step_s * 1000:.0f} ms/step, ETA {duration(mean_s * (steps - step))}"
    return f"{phase} step {step}/{steps}: train loss {loss:.6f} | {timing}"


def checkpoint_path(args) -> str:
    """--checkpoint, else checkpoint.pt in --out-dir (default: {cache}/runs/train_tiny)."""
    out_dir = args.out_dir or os.path.join(args.cache, "runs", "train_tiny")
    return args.checkpoint or os.path.join(out_dir, "checkpoint.pt")


@torch.no_grad()
def val_loss(model: GPT, val: MixedLoader, batches: int, autocast) -> float:
    model.eval()
    loss = sum(loss_of(model, val.batch_at(k), val, autocast).item() for k in range(batches)) / batches
    model.train()
    return loss


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--steps", type=int, default=200, help="pretraining steps (default 200)")
    ap.add_argument("--sft-steps", type=int, default=200, help="fine-tuning steps (default 200)")
    sft_mix = '{"primer": 0.1, "oasst1": 0.7, "dolly15k": 0.2}'
    ap.add_argument("--sft-mix", default=sft_mix, help='JSON weights, or a schedule [[step, {"oasst1": 1.0}], ...]')
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast (default fp32)")
    ap.add_argument("--attention", choices=ATTENTION, default="auto", help="packed rows (default auto: flex on CUDA)")
    ap.add_argument("--prefetch", type=int, default=2, help="batches a background thread keeps ready (default 2)")
    ap.add_argument("--d", type=int, default=64, help="model width (default 64)")
    ap.add_argument("--layers", type=int, default=2, help="blocks (default 2)")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    ap.add_argument("--T", type=int, default=128, help="context length (default 128)")
    ap.add_argument("--B", type=int, default=8, help="rows per batch (default 8)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--save-every", type=int, default=100)
    ap.add_argument("--out-dir", default=None, help="where the run writes (default: {cache}/runs/train_tiny)")
    ap.add_argument("--checkpoint", default=None, help="checkpoint file (default: {out-dir}/checkpoint.pt)")
    ap.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    args = ap.parse_args(argv)
    if args.prefetch < 0:
        ap.error(f"--prefetch must be >= 0, got {args.prefetch}")
    checkpoint = checkpoint_path(args)
    torch.manual_seed(args.seed)
    tok = SentencePieceTokenizer(layout.tokenizer_model(args.cache))
    attention = attention_kind(args.attention, args.device)
    model = GPT(tok.vocab_size, args.T, args.d, args.layers, args.heads, attention, args.device).to(args.device)
    autocast = autocast_of(args)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    start = {"phase": 0, "step": 0, "loader": None}
    if args.resume:
        start = torch.load(checkpoint, map_location=args.device, weights_only=True)
        print(f"resuming from {checkpoint} ({('pretrain', 'sft')[start['phase']]} step {start['step']})")
        model.load_state_dict(start["model"])
        opt.load_state_dict(start["optimizer"])
    for index, (phase, steps) in enumerate((("pretrain", args.steps), ("sft", args.sft_steps))):
        if index < start["phase"]:
            continue
        train, val = loaders(args, phase, tok)
        first = start["step"] if index == start["phase"] else 0
        if first:
            train.load_state_dict(start["loader"])
        else:
            print(f"{phase} val loss {val_loss(model, val, args.eval_batches, autocast):.4f} (after 0 steps)")
        trained_s = 0.0  # the wall time of this phase's steps so far (for the ETA)
        with batches_of(train, args) as batches:
            for step in range(first + 1, steps + 1):
                started = time.perf_counter()
                loss = loss_of(model, next(batches), train, autocast)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                value = loss.item()  # waits for the step (on CUDA too), so the time below is the step's
                step_s = time.perf_counter() - started
                trained_s += step_s
                print(step_line(phase, step, steps, value, step_s, trained_s / (step - first)), flush=True)
                if step % args.eval_every == 0 or step == steps:
                    print(
                        f"{phase} val loss {val_loss(model, val, args.eval_batches, autocast):.4f} (after {step} steps)"
                    )
                if step % args.save_every == 0 or step == steps:
                    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "phase": index, "step": step}
                    with atomic_open(checkpoint) as f:  # a killed run leaves the previous checkpoint whole
                        torch.save({**state, "loader": batches.state_dict()}, f)
                    print(f"checkpoint: {checkpoint} ({phase} step {step}/{steps})", flush=True)


if __name__ == "__main__":
    main()
