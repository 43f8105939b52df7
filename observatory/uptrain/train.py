"""Training and evaluation: seeded batches, AdamW, held-out perplexity, checkpoints that resume.

The batch of step ``i`` depends only on (seed, i), never on what ran before, so a resumed run reads
exactly the windows an uninterrupted one would; the base run reads steps 0..S-1 and every
uptraining run steps S.. onwards (fresh data, the same for every cell, the control included).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from observatory.uptrain.model import VOCAB, ByteLlama


class Stopped(Exception):
    """Training stopped early (budget spent, or a signal) after saving its checkpoint."""


def batch(data: torch.Tensor, seed: int, step: int, windows: int, context: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, data.numel() - context - 1, (windows,), generator=generator)
    return torch.stack([data[s:s + context + 1] for s in starts.tolist()]).long()


def loss_of(model: ByteLlama, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


@dataclass(frozen=True)
class Evaluation:
    loss: float  # mean negative log-likelihood per byte, nats
    scored_bytes: int

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @property
    def bits_per_byte(self) -> float:
        return self.loss / math.log(2)


def held_out_windows(data: torch.Tensor, windows: int, context: int) -> torch.Tensor:
    """``windows`` evenly spaced windows: the same bytes for every cell, so comparisons are paired."""
    starts = torch.linspace(0, data.numel() - context - 2, windows).long()
    return torch.stack([data[s:s + context + 1] for s in starts.tolist()]).long()


@torch.no_grad()
def evaluate(model: ByteLlama, windows: torch.Tensor, chunk: int = 32) -> Evaluation:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], chunk):
        part = windows[i:i + chunk]
        logits = model(part[:, :-1])
        total += float(F.cross_entropy(logits.reshape(-1, VOCAB), part[:, 1:].reshape(-1), reduction="sum"))
        count += part[:, 1:].numel()
    model.train()
    return Evaluation(loss=total / count, scored_bytes=count)


def optimizer(model: ByteLlama, lr: float) -> torch.optim.AdamW:
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def save_checkpoint(path: Path, model: ByteLlama, opt: torch.optim.Optimizer, step: int) -> None:
    """Written beside and renamed over: a kill during the write leaves the previous checkpoint."""
    partial = path.with_suffix(".partial")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, partial)
    os.replace(partial, path)


def load_checkpoint(path: Path, model: ByteLlama, opt: torch.optim.Optimizer) -> int:
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    return int(state["step"])


def run_steps(model: ByteLlama, opt: torch.optim.Optimizer, *, start: int, end: int, lr: Callable[[int], float],
              data_step: Callable[[int], torch.Tensor], checkpoint: Path, checkpoint_every: int,
              should_stop: Callable[[], bool], tick: Callable[[], None]) -> None:
    """Steps ``start``..``end - 1``; a checkpoint every ``checkpoint_every`` steps and at ``end``.
    ``should_stop`` is asked before each step; when it says so the checkpoint is saved and ``Stopped``
    raised, so the next run resumes at that step."""
    model.train()
    for step in range(start, end):
        if should_stop():
            save_checkpoint(checkpoint, model, opt, step)
            raise Stopped(step)
        for group in opt.param_groups:
            group["lr"] = lr(step)
        loss = loss_of(model, data_step(step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tick()
        if (step + 1 - start) % checkpoint_every == 0 and step + 1 < end:
            save_checkpoint(checkpoint, model, opt, step + 1)
    save_checkpoint(checkpoint, model, opt, end)
