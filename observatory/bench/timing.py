"""Timing that does not flatter: warm-up, many runs, medians, rotated inputs, contenders interleaved.

Every contender (our kernel, each peer, the copy and the matmul that measure the device's ceilings)
is called in turn, round
after round, so a neighbour stealing the CPU or a clock change hits all of them alike. Each call
takes the next of several input copies, so a working set that would fit in the last-level cache is
not served from it. On CUDA each call is bracketed by CUDA events; on the CPU by ``perf_counter``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch


@dataclass(frozen=True)
class Timing:
    median_s: float
    min_s: float
    runs: int


@dataclass(frozen=True)
class Contender:
    name: str
    call: Callable[[Any], Any]
    inputs: Sequence[Any]  # rotated: call i gets inputs[i % len(inputs)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_interleaved(contenders: Sequence[Contender], device: torch.device, *, warmup: int = 1,
                     repeats: int = 10) -> dict[str, Timing]:
    """Median and minimum seconds per call of each contender, measured round-robin."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    for contender in contenders:
        for i in range(warmup):
            contender.call(contender.inputs[i % len(contender.inputs)])
    synchronize(device)
    samples: dict[str, list] = {c.name: [] for c in contenders}
    for round_ in range(repeats):
        for contender in contenders:
            inputs = contender.inputs[(warmup + round_) % len(contender.inputs)]
            samples[contender.name].append(_timed_call(contender.call, inputs, device))
    synchronize(device)
    out = {}
    for name, runs in samples.items():
        seconds = [r.elapsed_time(e) / 1e3 for r, e in runs] if device.type == "cuda" else runs
        out[name] = Timing(median_s=statistics.median(seconds), min_s=min(seconds), runs=len(seconds))
    return out


def _timed_call(call, inputs, device):
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(inputs)
        end.record()
        return start, end  # read after the final synchronize: no sync inside the loop
    started = time.perf_counter()
    call(inputs)
    return time.perf_counter() - started


def copy_contender(device: torch.device, nbytes: int) -> tuple[Contender, int]:
    """A large device copy and the bytes it moves per call (read + written). Both buffers are written
    before timing starts, so no call pays the first touch of a page (a page fault per 4 KB)."""
    elements = nbytes // 4
    src = torch.ones(elements, dtype=torch.float32, device=device)
    dst = torch.zeros_like(src)  # written, not merely reserved: its pages are mapped now
    return Contender("copy", lambda pair: pair[1].copy_(pair[0]), [(src, dst)]), 2 * elements * 4


def read_contender(device: torch.device, inputs: Sequence[Sequence[torch.Tensor]]) -> tuple[Contender, int] | None:
    """Reading the same bytes the kernel reads, and nothing else: each call reads every tensor of its
    (rotated, like the kernel's) input tuple once; returns the contender and the bytes one call reads.

    On the CPU it is the C read loop built beside the kernel (``kernels.cpu_decode.read_lines``:
    integer sums over whole cache lines, the kernel's thread count), because ``torch.sum`` on
    float16/bfloat16 is bound by its conversions, not by memory (half of its float32 rate here).
    On CUDA a ``torch.sum`` per tensor, which is bound by memory. None where the C kernel cannot be
    built (the read ceiling is then unknown, never guessed)."""
    if device.type == "cuda":
        def call(tensors):
            for t in tensors:
                t.sum(dtype=torch.float32)

        return Contender("read", call, inputs), sum(t.nbytes for t in inputs[0])
    from kernels import cpu_decode

    if not cpu_decode.available():
        return None
    return Contender("read", cpu_decode.read_lines, inputs), cpu_decode.read_lines(inputs[0])[0]


def matmul_contender(device: torch.device, dtype: torch.dtype, size: int) -> tuple[Contender, float]:
    """A square ``size`` × ``size`` matmul in ``dtype`` and the FLOPs it does per call (2·size³): the
    device's dense arithmetic rate, measured beside the kernels it is the ceiling of."""
    generator = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(size, size, generator=generator, device=device).to(dtype) for _ in range(2))
    out = torch.empty(size, size, device=device, dtype=dtype)
    return Contender("matmul", lambda args: torch.matmul(*args, out=out), [(a, b)]), 2.0 * size**3
