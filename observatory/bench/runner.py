"""Run one decode-attention shape with our kernel and its peers, and the copy that sets the ceiling."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

import torch

from kernels import gqa_decode
from kernels.api import choose_backend
from kernels.peers import available_peers
from observatory.core import roofline
from observatory.bench.shapes import TORCH_DTYPES, AttentionShape, make_inputs, rotation_copies
from observatory.bench.timing import Contender, Timing, copy_contender, time_interleaved
from observatory.core.geometry import Geometry
from observatory.hardware import Device, match_device

# Bytes a rotation of input copies spans, and the size of the ceiling copy, per device type: beyond
# the last-level cache (this CPU's L3 is 260 MB; H100/H200 L2 is 50 MB).
ROTATE_BYTES = {"cpu": 768 * 2**20, "cuda": 512 * 2**20}
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 1024 * 2**20}


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


@dataclass
class CaseResult:
    shape: AttentionShape
    dtype: str
    backend: str
    ours: Timing
    kv_bytes: int
    ceiling_bytes_per_s: float
    peers: dict[str, Timing] = field(default_factory=dict)
    peer_errors: dict[str, str] = field(default_factory=dict)
    other_backends: dict[str, Timing] = field(default_factory=dict)  # our other implementations, same run
    predicted_s: float | None = None
    prediction_basis: str | None = None

    @property
    def bytes_per_s(self) -> float:
        return self.kv_bytes / self.ours.median_s

    @property
    def fraction_of_ceiling(self) -> float:
        return self.bytes_per_s / self.ceiling_bytes_per_s

    @property
    def speedups(self) -> dict[str, float]:
        return {name: t.median_s / self.ours.median_s for name, t in self.peers.items()}


def measure(shape: AttentionShape, dtype: str, device: LocalDevice, *, geometry: Geometry | None = None,
            peers: bool = True, warmup: int = 1, repeats: int = 10, backend: str = "auto",
            rotate_bytes: int | None = None, copy_bytes: int | None = None,
            also_backends: tuple[str, ...] = ()) -> CaseResult:
    """Time our kernel, each available peer and a large copy on one shape, interleaved.

    ``also_backends`` times other implementations of ours in the same rounds (say, the PyTorch path
    beside the C kernel); they are reported in ``other_backends``, never as peers.
    """
    torch_device = device.torch_device
    backend = choose_backend(torch_device, backend, TORCH_DTYPES[dtype], shape.head_dim)
    probe = make_inputs(shape, dtype, torch_device, copies=1)[0]
    kv_bytes = probe[1].nbytes + probe[2].nbytes
    per_copy = sum(t.nbytes for t in probe)
    del probe
    copies = rotation_copies(per_copy, rotate_bytes or ROTATE_BYTES[device.type])
    inputs = make_inputs(shape, dtype, torch_device, copies=copies)

    contenders = [Contender("ours", lambda args: gqa_decode(*args, backend=backend), inputs)]
    others = [b for b in also_backends if b != backend]
    for other in others:
        choose_backend(torch_device, other, TORCH_DTYPES[dtype], shape.head_dim)  # refuse what cannot run
        contenders.append(Contender(f"backend:{other}", lambda args, b=other: gqa_decode(*args, backend=b), inputs))
    errors: dict[str, str] = {}
    if peers:
        prepared_by: dict = {}  # peers that share a layout share its (timed-outside) copies
        for peer in available_peers(torch_device, shape.batch):
            try:
                if peer.prepare not in prepared_by:
                    prepared_by[peer.prepare] = [peer.prepare(*args) for args in inputs]
                peer.run(prepared_by[peer.prepare][0])  # fails here rather than mid-measurement
            except Exception as exc:  # a peer that cannot run this shape is reported, not fatal
                errors[peer.name] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            contenders.append(Contender(peer.name, peer.run, prepared_by[peer.prepare]))
    copy, copy_moved = copy_contender(torch_device, copy_bytes or COPY_BYTES[device.type])
    contenders.append(copy)

    timings = time_interleaved(contenders, torch_device, warmup=warmup, repeats=repeats)
    ceiling = copy_moved / timings.pop("copy").median_s
    other_times = {other: timings.pop(f"backend:{other}") for other in others}
    result = CaseResult(shape=shape, dtype=dtype, backend=backend, ours=timings.pop("ours"), kv_bytes=kv_bytes,
                        ceiling_bytes_per_s=ceiling, peers=timings, peer_errors=errors, other_backends=other_times)
    if geometry is not None:
        result.predicted_s, result.prediction_basis = predict(geometry, shape, dtype, device, ceiling)
    return result


def predict(geometry: Geometry, shape: AttentionShape, dtype: str, device: LocalDevice,
            ceiling_bytes_per_s: float) -> tuple[float, str]:
    """Roofline time of one attention call: catalog spec where the device is catalogued, else the
    measured copy ceiling standing in for bandwidth (a CPU)."""
    if device.catalog is not None:
        machine, basis = device.catalog, f"catalog:{device.catalog.id}"
    else:
        machine, basis = roofline.MeasuredMachine(device.name, ceiling_bytes_per_s), "measured-copy"
    estimate = roofline.decode_estimate(roofline.one_layer(geometry), machine, shape.context, shape.batch, dtype)
    return estimate.time_s, basis
