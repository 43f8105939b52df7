"""Memory tiers of a device: where the bytes of a decode step live, and how long reading them takes.

Most accelerators have one tier that matters (HBM, GDDR, unified DRAM). SRAM-first chips have
two: a small, very fast on-chip SRAM (Groq's LPU keeps everything there, Cerebras' wafer holds
44 GB of it, d-Matrix's Corsair 2 GB) and, on some, a large slow off-chip memory (Corsair's
LPDDR5). One figure for "memory" and one for "bandwidth" cannot describe such a chip: the model
would either fit in the big memory at the small one's speed, or run at SRAM speed from memory it
does not have.

Placement is greedy, fastest tier first: a decode step reads each weight and each cached token
once, so *which* bytes sit where does not change the time, only how many sit in each tier. Bytes
beyond the last tier's capacity are counted in it (its speed is what they would get if they fit;
the capacity figures say they do not). Tiers are read concurrently, so the time floor is the
slowest tier's share, ``max(bytes_t / bandwidth_t)`` — the hierarchical roofline's rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryTier:
    name: str  # "HBM3", "SRAM", "LPDDR5", ...
    bytes: int
    bandwidth_bytes_per_s: float
    on_chip: bool = False

    def __post_init__(self) -> None:
        if self.bytes <= 0 or not self.bandwidth_bytes_per_s > 0:
            raise ValueError(f"memory tier {self.name!r} needs a positive size and bandwidth")


def tiers_of(machine) -> tuple[MemoryTier, ...]:
    """A device's tiers, fastest first; a device that declares none has one, from its memory
    and bandwidth (size unknown: unbounded, so every byte lands in it)."""
    tiers = getattr(machine, "memory_tiers", None)
    if tiers:
        return tuple(sorted(tiers, key=lambda t: -t.bandwidth_bytes_per_s))
    size = machine.memory_bytes if machine.memory_bytes else 1 << 62
    return (MemoryTier("memory", size, machine.bandwidth_bytes_per_s),)


def place(total_bytes: int, tiers: Sequence[MemoryTier], devices: int = 1) -> list[int]:
    """Bytes held in each tier (same order), filling the fastest first over ``devices`` devices;
    what is left over is counted in the last tier."""
    if total_bytes < 0 or devices < 1:
        raise ValueError(f"total_bytes must be >= 0 and devices >= 1, got {total_bytes}, {devices}")
    left, placed = total_bytes, []
    for i, tier in enumerate(tiers):
        here = left if i == len(tiers) - 1 else min(left, tier.bytes * devices)
        placed.append(here)
        left -= here
    return placed


def read_seconds(total_bytes: int, tiers: Sequence[MemoryTier], devices: int = 1, efficiency: float = 1.0) -> float:
    """Time to read ``total_bytes`` once, placed by ``place``: the slowest tier's share, tiers read
    concurrently, each at ``efficiency`` of its bandwidth, ``devices`` devices in parallel."""
    placed = place(total_bytes, tiers, devices)
    return max((b / (t.bandwidth_bytes_per_s * efficiency * devices) for b, t in zip(placed, tiers)), default=0.0)


def on_chip_bytes(tiers: Sequence[MemoryTier]) -> int:
    return sum(t.bytes for t in tiers if t.on_chip)
