"""What the median new model asks of hardware, over time: pure, no I/O.

Two series the hardware and price pages draw:

- **Sequences beside the weights.** For a device and a model: how many sequences of
  ``context`` tokens fit in the device's memory once the model's bf16 weights are loaded,
  ``floor((memory - 2 B x parameters) / cache bytes of one sequence)``, 0 when the weights alone
  do not fit (the rule of ``roofline.max_batch``, here on precomputed sizes so a store of many
  models costs one division per model and device). Per device generation we report the median
  over the models that were *new* when the device was released (created in the ``window_days``
  before its release date), and over the models new in the ``window_days`` before the newest
  model in the store ("today"), each with n, the number of models behind the median.
- **Chips needed** for today's new models: ``ceil((2 B x parameters + one sequence's cache) /
  memory)`` per model, the median over them with n, spread with no replication (layer by layer,
  as SRAM-first chips pipeline a model; tensor parallelism replicates, see ``core.deployment``).
  For a chip with on-chip SRAM *and* off-chip memory, also the count that keeps everything on chip.
- **Median KV bytes per token per period** (bf16), with n.

Medians are the trends module's (``weighted_quantiles`` with unit weights): the median of
[1, 2] is 1.5.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from observatory.core.trends import period_start, weighted_quantiles

WEIGHT_BYTES_PER_PARAMETER = 2  # bf16
WINDOW_DAYS = 365
CONTEXT = 32_768


@dataclass(frozen=True)
class ModelSize:
    """One model as the capacity series see it."""

    model_id: str
    created: date
    parameters: int  # total; every weight is resident (MoE experts included)
    sequence_bytes: int  # KV cache of one sequence of the series' context, bf16 (windows applied)


@dataclass(frozen=True)
class DeviceMemory:
    id: str
    name: str
    released: date
    memory_bytes: int  # every tier
    on_chip_bytes: int = 0  # the on-chip SRAM tier of an SRAM-first chip; 0 when it has none


def sequences_beside_weights(memory_bytes: int, parameters: int, sequence_bytes: int) -> int:
    """Sequences whose cache fits beside the bf16 weights; 0 when the weights alone do not fit."""
    if sequence_bytes <= 0:
        raise ValueError(f"sequence_bytes must be positive, got {sequence_bytes}")
    free = memory_bytes - WEIGHT_BYTES_PER_PARAMETER * parameters
    return free // sequence_bytes if free > 0 else 0


def chips_needed(chip_bytes: int, parameters: int, sequence_bytes: int) -> int:
    """Chips of ``chip_bytes`` each that hold the bf16 weights and one sequence's cache, spread with
    no replication (layers over chips, as SRAM-first deployments pipeline them)."""
    if chip_bytes <= 0 or sequence_bytes <= 0:
        raise ValueError(f"chip_bytes and sequence_bytes must be positive, got {chip_bytes}, {sequence_bytes}")
    return math.ceil((WEIGHT_BYTES_PER_PARAMETER * parameters + sequence_bytes) / chip_bytes)


def _chips_summary(chip_bytes: int, models: Sequence[ModelSize]) -> dict:
    needed = [chips_needed(chip_bytes, m.parameters, m.sequence_bytes) for m in models]
    return {"median": _median(needed), "n": len(needed), "max": max(needed, default=None)}


def _median(values: Sequence[float]) -> float | None:
    return weighted_quantiles([(v, 1.0) for v in values], (0.5,))[0]


def _new_between(models: Sequence[ModelSize], end: date, window_days: int) -> list[ModelSize]:
    start = end - timedelta(days=window_days)
    return [m for m in models if start < m.created <= end]


def _summary(device: DeviceMemory, models: Sequence[ModelSize]) -> dict:
    fits = [sequences_beside_weights(device.memory_bytes, m.parameters, m.sequence_bytes) for m in models]
    return {"median": _median(fits), "n": len(fits), "weights_do_not_fit": sum(1 for f in fits if f == 0)}


def capacity_trend(devices: Iterable[DeviceMemory], models: Sequence[ModelSize],
                   window_days: int = WINDOW_DAYS) -> dict:
    """Per device (by release date): the median sequences beside the weights for the models new at
    its release and for today's new models (``today`` = the newest model's creation day); and the
    median chips today's new models need for their weights plus one sequence (``chips_today``), and,
    on a chip with off-chip memory too, the chips if everything stays in its SRAM
    (``chips_today_on_chip``)."""
    if window_days < 1:
        raise ValueError(f"window_days must be >= 1, got {window_days}")
    today = max((m.created for m in models), default=None)
    recent = _new_between(models, today, window_days) if today else []
    rows = []
    for device in sorted(devices, key=lambda d: (d.released, d.id)):
        rows.append({"id": device.id, "name": device.name, "released": device.released,
                     "memory_bytes": device.memory_bytes, "on_chip_bytes": device.on_chip_bytes,
                     "at_release": _summary(device, _new_between(models, device.released, window_days)),
                     "today": _summary(device, recent),
                     "chips_today": _chips_summary(device.memory_bytes, recent),
                     "chips_today_on_chip": (_chips_summary(device.on_chip_bytes, recent)
                                             if 0 < device.on_chip_bytes < device.memory_bytes else None)})
    return {"today": today, "window_days": window_days, "rows": rows}


def median_by_period(points: Iterable[tuple[date, float]], period: str = "quarter") -> list[dict]:
    """Median value and n per period, oldest first; periods without points are left out."""
    groups: dict[date, list[float]] = {}
    for day, value in points:
        groups.setdefault(period_start(day, period), []).append(value)
    return [{"period_start": start, "median": _median(values), "n": len(values)}
            for start, values in sorted(groups.items())]
