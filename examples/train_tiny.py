"""Train a tiny GPT on the caches: pretrain on every pretrain cache, then fine-tune on packed SFT rows.

    python examples/train_tiny.py --cache cache --steps 200 --sft-steps 200 [--device cuda] [--resume]

The model (0.1 M parameters plus 64 per vocabulary id: 1.1 M with the 16k tokenizer): token + learned
position embeddings, two pre-norm blocks of causal self-attention through
F.scaled_dot_product_attention and an MLP, 64 wide, a tied output head. Packed SFT batches bring
segment_ids and position_ids: attention takes block_causal_mask (a token sees only its own example)
and the position embeddings the ids that restart per example.
Pretraining mixes the built pretrain caches in proportion to their train tokens; fine-tuning mixes
the SFT caches by --sft-mix (y_masked targets, the loader's ignore_index). Both read MixedLoader in
epoch mode. Every step prints the train loss; val loss (the mean over --eval-batches fixed batches of
the val splits) is printed before each phase, every --eval-every steps and at its end. The
checkpoint (--checkpoint, saved every --save-every steps and at the end) holds the model, the
optimizer, the phase and step, and the loader's state_dict: --resume continues with the batches the
uninterrupted run would have read (the same losses, on the same device).
"""

from __future__ import annotations

import argparse
import json
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


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.ln1, self.ln2 = heads, nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, h: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        B, T, d = h.shape
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in self.qkv(self.ln1(h)).split(d, dim=2))
        if mask is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        h = h + self.proj(a.transpose(1, 2).reshape(B, T, d))
        return h + self.mlp(self.ln2(h))


class GPT(nn.Module):
    def __init__(self, vocab: int, T: int, d: int, layers: int, heads: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        for module in self.modules():  # GPT-2's init: small normal weights, zero biases
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, x, targets, segment_ids=None, position_ids=None, ignore_index=-100) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device) if position_ids is None else position_ids
        mask = None if segment_ids is None else block_causal_mask(segment_ids)
        h = self.tok(x) + self.pos(positions)
        for block in self.blocks:
            h = block(h, mask)
        logits = self.head(self.ln(h))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index)


def loss_of(model: GPT, batch, loader: MixedLoader) -> torch.Tensor:
    if batch.y_masked is None:  # pretrain: every next token is a target
        return model(batch.x, batch.y)
    return model(batch.x, batch.y_masked, batch.segment_ids, batch.position_ids, loader.ignore_index)


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


@torch.no_grad()
def val_loss(model: GPT, val: MixedLoader, batches: int) -> float:
    model.eval()
    loss = sum(loss_of(model, val.batch_at(k), val).item() for k in range(batches)) / batches
    model.train()
    return loss


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--steps", type=int, default=200, help="pretraining steps (default 200)")
    ap.add_argument("--sft-steps", type=int, default=200, help="fine-tuning steps (default 200)")
    ap.add_argument("--sft-mix", default='{"primer": 0.1, "oasst1": 0.7, "dolly15k": 0.2}', help="JSON weights")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--T", type=int, default=128, help="context length (default 128)")
    ap.add_argument("--B", type=int, default=8, help="rows per batch (default 8)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--save-every", type=int, default=100)
    ap.add_argument("--checkpoint", default="checkpoints/train_tiny.pt")
    ap.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    tok = SentencePieceTokenizer(layout.tokenizer_model(args.cache))
    model = GPT(tok.vocab_size, args.T, d=64, layers=2, heads=4).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    start = {"phase": 0, "step": 0, "loader": None}
    if args.resume:
        start = torch.load(args.checkpoint, map_location=args.device, weights_only=True)
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
            print(f"{phase} val loss {val_loss(model, val, args.eval_batches):.4f} (after 0 steps)")
        for step in range(first + 1, steps + 1):
            loss = loss_of(model, next(train), train)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print(f"{phase} step {step}: train loss {loss.item():.6f}")
            if step % args.eval_every == 0 or step == steps:
                print(f"{phase} val loss {val_loss(model, val, args.eval_batches):.4f} (after {step} steps)")
            if step % args.save_every == 0 or step == steps:
                state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "phase": index, "step": step}
                with atomic_open(args.checkpoint) as f:  # a killed run leaves the previous checkpoint whole
                    torch.save({**state, "loader": train.state_dict()}, f)


if __name__ == "__main__":
    main()
