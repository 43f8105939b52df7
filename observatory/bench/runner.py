"""Run one decode-attention shape with our kernel, its peers and (optionally) the model's MHA
counterfactual in the same interleaved rounds, beside the copy and the matmul that set the device's
two ceilings and a read of the same cache bytes (the kernel's own memory ceiling)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field, replace

import torch

from kernels import gqa_decode, mla_decode
from kernels.api import choose_backend
from kernels.peers import available_mla_peers, available_peers
from observatory.bench.shapes import (
    TORCH_DTYPES,
    AttentionShape,
    input_bytes,
    make_inputs,
    rotation_copies,
)
from observatory.bench.timing import (
    Contender,
    Timing,
    copy_contender,
    matmul_contender,
    read_contender,
    time_interleaved,
)
from observatory.catalog.hardware import Device, match_device
from observatory.core import roofline
from observatory.core.geometry import Geometry
from observatory.core.kvcache import mha_counterfactual

# Bytes a rotation of input copies spans, and the size of the ceiling copy, per device type: beyond
# the last-level cache (this CPU's L3 is 260 MB; H100/H200 L2 is 50 MB).
ROTATE_BYTES = {"cpu": 768 * 2**20, "cuda": 512 * 2**20}
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 1024 * 2**20}
# Side of the square matmul that measures the arithmetic ceiling: long enough to reach the device's
# GEMM rate (17 GFLOP on a CPU, where 1024³ reached only 2/3 of 2048³'s rate; ~1 TFLOP on a GPU),
# short enough to sit in every round.
MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}
# Share of the memory free when a benchmark starts that its tensors may take (the rest is left to
# whatever else runs: the OS, other processes, the allocator's slack).
MEMORY_SHARE = {"cpu": 0.5, "cuda": 0.8}


class DoesNotFit(MemoryError):
    """The shape's inputs need more memory than the device has free; the message says how much."""


@dataclass(frozen=True)
class LocalDevice:
    torch_device: torch.device
    name: str
    catalog: Device | None
    software: dict

    @property
    def type(self) -> str:
        return self.torch_device.type


def local_device(requested: str = "auto") -> LocalDevice:
    """The device to benchmark on: CUDA when present (or asked for), else the CPU."""
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {requested!r}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda requested but torch sees no CUDA device")
    use_cuda = requested == "cuda" or requested == "auto" and torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
    software = {"torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads()}
    try:
        import triton

        software["triton"] = triton.__version__
    except ImportError:
        software["triton"] = None
    if use_cuda:
        name = torch.cuda.get_device_name(device)
        software["cuda"] = torch.version.cuda
        return LocalDevice(device, name, match_device(name), software)
    from kernels import cpu_decode

    software["cc"] = cpu_decode.compiler_version()  # what built the C kernel; None: the PyTorch path runs
    return LocalDevice(device, f"cpu: {_cpu_model()}", None, software)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def free_memory(device: torch.device) -> int | None:
    """Bytes free on the device now: CUDA's free memory, or the CPU's MemAvailable (None if unknown)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def memory_budget(device: torch.device) -> int | None:
    free = free_memory(device)
    return None if free is None else int(free * MEMORY_SHARE[device.type])


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.1f} GB"


class Budget:
    """Bytes a benchmark's tensors may take (None: no limit known), and how many are taken."""

    def __init__(self, total: int | None):
        self.total, self.used = total, 0

    @property
    def left(self) -> int | None:
        return None if self.total is None else max(self.total - self.used, 0)

    def fits(self, nbytes: int) -> bool:
        return self.total is None or nbytes <= self.left

    def copies(self, per_copy: int, wanted: int) -> int:
        """Up to ``wanted`` input copies of ``per_copy`` bytes that fit (0: not even one)."""
        return wanted if self.total is None else min(wanted, self.left // max(per_copy, 1))

    def take(self, nbytes: int) -> None:
        self.used += nbytes

    def describe(self) -> str:
        return "no limit" if self.total is None else f"{_gb(self.left)} left of {_gb(self.total)} usable here"


@dataclass
class Counterfactual:
    """The model's MHA counterfactual (K = H), timed in the same rounds as the model's own shape."""

    shape: AttentionShape
    backend: str | None = None
    timing: Timing | None = None
    kv_bytes: int | None = None
    predicted_s: float | None = None
    error: str | None = None  # why it did not run (memory, a backend that cannot take it)


@dataclass
class CaseResult:
    shape: AttentionShape
    dtype: str
    backend: str
    ours: Timing
    kv_bytes: int
    ceiling_bytes_per_s: float
    matmul_flops_per_s: float | None = None
    read_bytes_per_s: float | None = None  # reading the same cache bytes and nothing else (None: not measured)
    peers: dict[str, Timing] = field(default_factory=dict)
    peer_errors: dict[str, str] = field(default_factory=dict)
    other_backends: dict[str, Timing] = field(default_factory=dict)  # our other implementations, same run
    predicted_s: float | None = None
    prediction_basis: str | None = None
    predicted_bound: str | None = None  # "memory" | "compute": which roof the prediction sits under
    counterfactual: Counterfactual | None = None

    @property
    def bytes_per_s(self) -> float:
        return self.kv_bytes / self.ours.median_s

    @property
    def fraction_of_ceiling(self) -> float:
        return self.bytes_per_s / self.ceiling_bytes_per_s

    @property
    def fraction_of_read(self) -> float | None:
        """Our cache bytes per second as a share of reading those same bytes: the kernel's own ceiling
        (a copy also writes, and its rate is not a reader's)."""
        return self.bytes_per_s / self.read_bytes_per_s if self.read_bytes_per_s else None

    @property
    def flops(self) -> float:
        return self.shape.flops

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.ours.median_s

    @property
    def fraction_of_matmul(self) -> float | None:
        return self.flops_per_s / self.matmul_flops_per_s if self.matmul_flops_per_s else None

    @property
    def speedups(self) -> dict[str, float]:
        return {name: t.median_s / self.ours.median_s for name, t in self.peers.items()}

    @property
    def measured_speedup(self) -> float | None:
        """MHA counterfactual's time ÷ ours: what grouping (or the latent) buys, measured."""
        cf = self.counterfactual
        return cf.timing.median_s / self.ours.median_s if cf and cf.timing else None

    @property
    def predicted_speedup(self) -> float | None:
        cf = self.counterfactual
        return cf.predicted_s / self.predicted_s if cf and cf.predicted_s and self.predicted_s else None


def cache_tensors(shape: AttentionShape, args: tuple) -> tuple:
    """The cache tensors of one ``make_inputs`` tuple: what the kernel reads (keys and values, or the latent)."""
    return (args[1],) if shape.latent else (args[1], args[2])


def decode_call(shape: AttentionShape, backend: str):
    """Our kernel as a contender's call on ``make_inputs`` tuples."""
    if shape.latent:
        return lambda args: mla_decode(*args, head_dim_v=shape.value_dim, backend=backend)
    return lambda args: gqa_decode(*args, backend=backend)


def measure(shape: AttentionShape, dtype: str, device: LocalDevice, *, geometry: Geometry | None = None,
            peers: bool = True, warmup: int = 1, repeats: int = 10, backend: str = "auto",
            rotate_bytes: int | None = None, copy_bytes: int | None = None, matmul_size: int | None = None,
            also_backends: tuple[str, ...] = (), counterfactual: AttentionShape | None = None,
            memory_bytes: int | None = None) -> CaseResult:
    """Time our kernel, each available peer, the MHA ``counterfactual`` (when given), a large copy and
    a large matmul on one shape, interleaved.

    ``also_backends`` times other implementations of ours in the same rounds (say, the PyTorch path
    beside the C kernel); they are reported in ``other_backends``, never as peers. ``memory_bytes``
    caps what the inputs may take (default: a share of the device's free memory): raises
    ``DoesNotFit`` when the shape itself does not fit; a counterfactual or peer that does not fit is
    reported as not run.
    """
    torch_device = device.torch_device
    torch_dtype = TORCH_DTYPES[dtype]
    requested = backend
    backend = choose_backend(torch_device, requested, torch_dtype, shape.head_dim, shape.value_dim)
    budget = Budget(memory_bytes if memory_bytes is not None else memory_budget(torch_device))
    rotate = rotate_bytes or ROTATE_BYTES[device.type]
    per_copy = input_bytes(shape, dtype)
    copies = budget.copies(per_copy, rotation_copies(per_copy, rotate))
    if copies < 1:
        raise DoesNotFit(f"{shape.label()} {dtype} needs {_gb(per_copy)} of inputs; {budget.describe()}")
    inputs = make_inputs(shape, dtype, torch_device, copies=copies)
    budget.take(copies * per_copy)

    contenders = [Contender("ours", decode_call(shape, backend), inputs)]
    others = [b for b in also_backends if b != backend]
    for other in others:
        choose_backend(torch_device, other, torch_dtype, shape.head_dim, shape.value_dim)  # refuse what cannot run
        contenders.append(Contender(f"backend:{other}", decode_call(shape, other), inputs))

    cf, cf_contender = (None, None) if counterfactual is None else _counterfactual(
        counterfactual, dtype, torch_device, requested, budget, rotate)
    contenders += [cf_contender] if cf_contender else []
    peer_contenders, errors = _peers(shape, inputs, torch_device, budget) if peers else ([], {})
    contenders += peer_contenders
    copy, copy_moved = copy_contender(torch_device, copy_bytes or COPY_BYTES[device.type])
    matmul, matmul_flops = matmul_contender(torch_device, torch_dtype, matmul_size or MATMUL_SIZE[device.type])
    contenders += [copy, matmul]
    read = read_contender(torch_device, [cache_tensors(shape, args) for args in inputs])
    contenders += [read[0]] if read else []

    timings = time_interleaved(contenders, torch_device, warmup=warmup, repeats=repeats)
    ceiling = copy_moved / timings.pop("copy").median_s
    read_rate = read[1] / timings.pop("read").median_s if read else None
    matmul_rate = matmul_flops / timings.pop("matmul").median_s
    other_times = {other: timings.pop(f"backend:{other}") for other in others}
    if cf_contender:
        cf.timing = timings.pop(cf_contender.name)
    result = CaseResult(shape=shape, dtype=dtype, backend=backend, ours=timings.pop("ours"),
                        kv_bytes=shape.kv_bytes(dtype), ceiling_bytes_per_s=ceiling, matmul_flops_per_s=matmul_rate,
                        read_bytes_per_s=read_rate, peers=timings, peer_errors=errors, other_backends=other_times, counterfactual=cf)
    if geometry is not None:
        estimate, result.prediction_basis = predict(geometry, shape, dtype, device, ceiling, matmul_rate)
        result.predicted_s, result.predicted_bound = estimate.time_s, estimate.bound
        if cf is not None:
            cf.predicted_s = predict(mha_counterfactual(geometry), counterfactual, dtype, device, ceiling,
                                     matmul_rate)[0].time_s
    return result


def _counterfactual(shape: AttentionShape, dtype: str, device: torch.device, backend: str, budget: Budget,
                    rotate: int) -> tuple[Counterfactual, Contender | None]:
    """The MHA counterfactual's record and its contender (None, with the reason recorded, when it
    cannot run here: no backend takes its head dims, or its inputs do not fit)."""
    cf = Counterfactual(shape, kv_bytes=shape.kv_bytes(dtype))
    try:
        cf.backend = choose_backend(device, backend, TORCH_DTYPES[dtype], shape.head_dim, shape.value_dim)
    except ValueError as exc:
        cf.error = str(exc)
        return cf, None
    per_copy = input_bytes(shape, dtype)
    copies = budget.copies(per_copy, rotation_copies(per_copy, rotate))
    if copies < 1:
        cf.error = f"not run: needs {_gb(per_copy)} of inputs; {budget.describe()}"
        return cf, None
    inputs = make_inputs(shape, dtype, device, copies=copies, seed=1)
    budget.take(copies * per_copy)
    return cf, Contender("counterfactual", decode_call(shape, cf.backend), inputs)


def _peers(shape: AttentionShape, inputs: list, device: torch.device, budget: Budget) -> tuple[list, dict[str, str]]:
    """Contenders for the peers that run on this device and fit; why each of the others did not run."""
    contenders, errors = [], {}
    prepared_by: dict = {}  # peers that share a layout share its (timed-outside) copies
    candidates = available_mla_peers(device, shape.value_dim) if shape.latent else available_peers(device, shape.batch)
    for peer in candidates:
        extra = peer.scratch(*inputs[0]) * (len(inputs) if peer.prepare not in prepared_by else 1)
        if not budget.fits(extra):
            errors[peer.name] = f"not run: needs about {_gb(extra)} beyond the inputs; {budget.describe()}"
            continue
        try:
            if peer.prepare not in prepared_by:
                prepared_by[peer.prepare] = [peer.prepare(*args) for args in inputs]
            peer.run(prepared_by[peer.prepare][0])  # fails here rather than mid-measurement
        except Exception as exc:  # a peer that cannot run this shape is reported, not fatal
            errors[peer.name] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        budget.take(extra)
        contenders.append(Contender(peer.name, peer.run, prepared_by[peer.prepare]))
    return contenders, errors


def predict(geometry: Geometry, shape: AttentionShape, dtype: str, device: LocalDevice, ceiling_bytes_per_s: float,
            matmul_flops_per_s: float | None = None) -> tuple[roofline.DecodeEstimate, str]:
    """Roofline of one attention call: catalog spec where the device is catalogued, else the measured
    copy bandwidth and matmul rate standing in for the spec (a CPU). Compute-bound shapes (MLA; GQA
    with a large G on a CPU) are floored by the FLOP rate, the rest by bandwidth."""
    if device.catalog is not None:
        machine, basis = device.catalog, f"catalog:{device.catalog.id}"
    else:
        machine = roofline.MeasuredMachine(device.name, ceiling_bytes_per_s, flops=matmul_flops_per_s)
        basis = "measured-copy-and-matmul" if matmul_flops_per_s else "measured-copy"
    if geometry.k_equals_v:
        # The kernels take K and V as two tensors (make_inputs builds both), so the call reads a shared
        # K = V cache twice; the prediction follows what is run, not the model's one stored copy.
        geometry = replace(geometry, k_equals_v=False)
    estimate = roofline.decode_estimate(roofline.one_layer(geometry), machine, shape.context, shape.batch, dtype)
    return estimate, basis
