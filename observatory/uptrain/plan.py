"""The experiment's sizes and grid, from ``--scale`` and the seed.

Scale 1 (the default) is sized for about ten minutes on two quiet CPU cores (one torch thread: see
``observatory uptrain --threads``): a 0.5M-parameter
byte-level Llama (hidden 128, 16 heads of 8, 2 layers, 64-byte context) trained for 1,500 steps of
8 windows, then 13 uptraining runs (3 poolings x 4 K, and the MHA control) of 10% of that each:
2.3x the base steps in all (3,450), plus 53 held-out evaluations. The committed run
(benchmarks/results/uptrain.json) took 5.3 minutes of wall time on one thread of this project's
shared 2-core machine (2026-12-02, load average 1 to 10 while it ran), in two invocations: stopped
by SIGTERM and resumed. ``--budget-min`` caps any run, which then resumes. ``--scale s`` multiplies the steps; from s = 4 the width and depth grow
by sqrt(s) too (for a GPU or a long night). Below 0.5 it is the test model (hidden 32, one layer,
32-byte context, at least 40 steps), which finishes in seconds and measures nothing worth quoting.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from observatory.uptrain.shape import ModelShape

HEADS = 16  # so that H/2, H/4, H/8 and 1 are four different K
FRACTIONS = (0.0, 0.025, 0.05, 0.10)  # of the base steps, as the GQA paper's uptraining proportions
METHODS = ("mean", "first", "random")
CONTROL = "mha"  # the MHA model uptrained for the same steps
BASE_STEPS = 1500
TEST_SCALE_BELOW = 0.5
# Two runs of the same experiment on the same machine agree to this relative difference in every
# cell's held-out perplexity (same seed, same thread count: in practice they agree exactly; the
# tolerance leaves room for a different BLAS or thread count reordering float sums).
DETERMINISM_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Sizes:
    scale: float
    shape: ModelShape
    steps: int  # base training steps
    batch: int  # windows per step
    lr: float  # peak; linear warm-up, cosine to lr_floor * lr
    warmup: int
    lr_floor: float
    eval_windows: int  # held-out windows of shape.context bytes, evenly spaced
    checkpoint_every: int  # steps between checkpoints: a kill loses at most this many
    decode_context: int  # tokens in the cache when the kernel is timed
    decode_batch: int

    def describe(self) -> dict:
        return {**asdict(self), "shape": {**asdict(self.shape), "head_dim": self.shape.head_dim}}


def sizes(scale: float = 1.0) -> Sizes:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"--scale must be a positive number, got {scale!r}")
    if scale < TEST_SCALE_BELOW:
        shape = ModelShape(hidden=32, layers=1, heads=HEADS, kv_heads=HEADS, intermediate=64, context=32)
        return Sizes(scale=scale, shape=shape, steps=max(40, round(BASE_STEPS * scale)), batch=4, lr=3e-3,
                     warmup=4, lr_floor=0.1, eval_windows=8, checkpoint_every=10, decode_context=256,
                     decode_batch=1)
    grow = max(1, math.isqrt(int(scale))) if scale >= 4 else 1
    shape = ModelShape(hidden=128 * grow, layers=2 * grow, heads=HEADS, kv_heads=HEADS, intermediate=384 * grow,
                       context=64)
    return Sizes(scale=scale, shape=shape, steps=round(BASE_STEPS * scale), batch=8, lr=3e-3 / grow, warmup=40,
                 lr_floor=0.1, eval_windows=256, checkpoint_every=100, decode_context=4096, decode_batch=8)


def kv_grid(heads: int = HEADS) -> tuple[int, ...]:
    """K = H/2, H/4, H/8 and 1."""
    return (heads // 2, heads // 4, heads // 8, 1)


def uptrain_steps(base_steps: int, fraction: float) -> int:
    """Steps of an uptraining run of ``fraction`` of the base steps (at least one, unless 0%)."""
    return 0 if fraction == 0 else max(1, round(base_steps * fraction))


def cells() -> list[tuple[str, int]]:
    """(method, K) of every uptraining run, the MHA control last."""
    return [(method, k) for method in METHODS for k in kv_grid()] + [(CONTROL, HEADS)]


def lr_at(step: int, s: Sizes) -> float:
    """Base training's learning rate at ``step`` (0-based)."""
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - s.warmup)
    return s.lr * (s.lr_floor + (1 - s.lr_floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def uptrain_lr(s: Sizes) -> float:
    """Uptraining continues at the base run's final rate, held constant, so a run's 5% point is the
    same model a separate 5% run would give (and the MHA control sees exactly the same schedule)."""
    return s.lr * s.lr_floor
