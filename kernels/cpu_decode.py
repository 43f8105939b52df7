"""The C decode kernel (``cpu_decode.c``): built on first use with the system C compiler, then called
through ctypes.

Why ctypes and not a PyTorch C++ extension: the kernel needs neither Python's nor PyTorch's headers,
so it compiles in under a second with any C compiler (``$CC``, else ``cc``), and the shared object
is cached under ``$XDG_CACHE_HOME/gqa-observatory/kernels`` (default ``~/.cache``), named by a hash
of the source, the flags, the compiler and this CPU's feature flags (it is built with
``-march=native``). It links ``libgomp.so.1``, which PyTorch has already loaded, so its OpenMP
threads are PyTorch's own (``torch.get_num_threads()``), not a second pool competing for the cores.

Where no compiler is found or the build fails, ``backend="auto"`` falls back to the PyTorch path and
``unavailable_reason()`` says why; asking for ``backend="cpu"`` then raises with that reason.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("cpu_decode.c")
COMPILE_FLAGS = ("-O3", "-march=native", "-ffast-math", "-fopenmp", "-fPIC")
# Linked in a second step, without -ffast-math: given it at link time GCC < 13 adds crtfastmath.o,
# whose constructor turns on flush-to-zero for the whole process the library is loaded into.
LINK_FLAGS = ("-shared", "-fopenmp")
LIBS = ("-lm",)  # libmvec: the vectorised expf that -ffast-math calls
DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
NEG = -1e30  # the kernel's "no tokens" log-sum-exp (it never computes with infinities)
VECTOR = 16  # floats per vector in the kernel: head_dim must be a multiple
MIN_SPLIT_TOKENS = 512  # a slice shorter than this costs more to merge than it gains in parallelism
BUILD_TIMEOUT_S = 120


class BuildError(RuntimeError):
    """The C kernel could not be compiled or loaded."""


def default_cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "gqa-observatory" / "kernels"


def build(cc: str | None = None, cache_dir: Path | None = None) -> Path:
    """Compile ``cpu_decode.c`` unless a build of this exact source, flags, compiler and CPU is cached;
    return the shared object's path. Concurrent builders are safe: each writes a private temporary
    file and renames it into place."""
    cc, compiler = _find_compiler(cc)
    if compiler is None:
        raise BuildError(f"no C compiler: {cc!r} is not on PATH (set CC to one)")
    cache_dir = Path(cache_dir or default_cache_dir())
    source = SOURCE.read_bytes()
    flags = " ".join(COMPILE_FLAGS + LINK_FLAGS + LIBS).encode()
    key = hashlib.sha256(b"\0".join([source, flags, _compiler_identity(compiler), _cpu_flags()])).hexdigest()[:16]
    target = cache_dir / f"cpu_decode-{key}.so"
    if target.exists():
        return target
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=target.stem, suffix=".so.partial", dir=cache_dir)
        os.close(fd)
    except OSError as exc:
        raise BuildError(f"cannot write the kernel cache {cache_dir}: {exc}") from None
    obj = partial.removesuffix(".so.partial") + ".o"
    try:
        _run(cc, [compiler, *COMPILE_FLAGS, "-c", str(SOURCE), "-o", obj], "compile")
        _run(cc, [compiler, *LINK_FLAGS, obj, "-o", partial, *LIBS], "link")
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)
        Path(obj).unlink(missing_ok=True)
    return target


def _find_compiler(cc: str | None = None) -> tuple[str, str | None]:
    """The compiler asked for (``cc``, else ``$CC``, else ``cc``) and its path on PATH (None: missing)."""
    cc = cc or os.environ.get("CC") or "cc"
    return cc, shutil.which(cc)


def _run(cc: str, command: list[str], step: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{cc} did not {step} {SOURCE.name} in {BUILD_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise BuildError(f"{cc} failed to {step} {SOURCE.name} (exit {done.returncode}): " + " | ".join(tail))


def compiler_version() -> str | None:
    """The first line of ``cc --version`` for the compiler that built the loaded kernel (None without one)."""
    compiler = _find_compiler()[1] if available() else None
    if compiler is None:
        return None
    return _compiler_identity(compiler).decode(errors="replace").partition("\n")[0] or compiler


@functools.cache
def _compiler_identity(compiler: str) -> bytes:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return compiler.encode()


def _cpu_flags() -> bytes:
    try:
        with open("/proc/cpuinfo", "rb") as info:
            return next((line for line in info if line.startswith(b"flags")), b"")
    except OSError:
        return os.uname().machine.encode()


def load(path: Path) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise BuildError(f"cannot load {path}: {exc}") from None
    fn = lib.gqa_decode_cpu
    p, i, long, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_float
    fn.argtypes = [i, p, long, long, p, long, long, long, p, long, long, long,  # dtype, q, k, v
                   p, long, i, p,  # table, table_width, block_size, lengths
                   i, i, i, i, i, i, f, i, p, p]  # batch, splits, K, G, DK, DV, scale, threads, out, lse
    fn.restype = ctypes.c_int
    reader = lib.read_lines
    reader.argtypes = [i, p, p, i]  # buffers, their addresses, their byte counts, threads
    reader.restype = ctypes.c_ulonglong
    return lib


@functools.cache
def _library() -> tuple[ctypes.CDLL | None, str | None]:
    try:
        return load(build()), None
    except BuildError as exc:
        return None, str(exc)


def available() -> bool:
    return _library()[0] is not None


def unavailable_reason() -> str | None:
    """Why the C kernel cannot run here (None when it can)."""
    return _library()[1]


def unsupported(device: torch.device, dtype: torch.dtype, head_dim: int, head_dim_v: int | None = None) -> str | None:
    """Why these inputs need another implementation (None when the C kernel takes them)."""
    if device.type != "cpu":
        return f"the C kernel runs on the CPU, not {device.type}"
    if dtype not in DTYPE_CODES:
        return f"the C kernel does not take {dtype}"
    for name, width in (("head_dim", head_dim), ("the value head_dim", head_dim_v)):
        if width is not None and width % VECTOR:
            return f"the C kernel needs {name} a multiple of {VECTOR}, got {width}"
    return unavailable_reason()


def splits_for(batch: int, longest: int, threads: int) -> int:
    """Slices per sequence: the fewest that make batch × slices a multiple of the thread count (every
    thread gets the same number of work items), none shorter than MIN_SPLIT_TOKENS."""
    return max(1, min(threads // math.gcd(batch, threads), longest // MIN_SPLIT_TOKENS))


READ_GROUP = 256  # bytes: read_lines reads whole groups of four cache lines


def read_lines(tensors) -> tuple[int, int]:
    """Read every byte of each contiguous tensor once, with the kernel's thread count (the read ceiling
    the decode benchmark sets beside the kernel); return the bytes read and the wrapping sum of the
    64-bit words read (what keeps the loads from being optimised away; tests check it). Each tensor's
    tail under READ_GROUP bytes is left unread and not counted."""
    lib, reason = _library()
    if lib is None:
        raise BuildError(reason)
    for t in tensors:
        if not t.is_contiguous() or t.device.type != "cpu":
            raise ValueError("read_lines takes contiguous CPU tensors")
    n = len(tensors)
    addresses = (ctypes.c_void_p * n)(*(t.data_ptr() for t in tensors))
    sizes = (ctypes.c_long * n)(*(t.nbytes for t in tensors))
    checksum = lib.read_lines(n, addresses, sizes, torch.get_num_threads())
    return sum(t.nbytes // READ_GROUP * READ_GROUP for t in tensors), checksum


def gqa_decode_cpu(q, k_cache, v_cache, cache_seqlens, block_table, scale, shape, out, splits=None):
    """Write the attention output into ``out`` and return the log-sum-exp ``(batch, H)`` float32.

    Inputs are already checked by ``kernels.api.check_inputs``. ``splits`` overrides how many slices
    each sequence is cut into (tests use it to exercise the merge on short sequences).
    """
    from kernels.torch_decode import merge

    lib, reason = _library()
    if lib is None:
        raise BuildError(reason)
    b, H = shape.batch, shape.num_heads
    lengths = cache_seqlens.contiguous()
    if block_table is None:  # a contiguous cache is a paged one with one page per sequence
        table = torch.arange(b, dtype=torch.int32).view(b, 1)
    else:
        table = block_table.contiguous()
    threads = torch.get_num_threads()
    splits = splits or splits_for(b, int(lengths.max()), threads)
    out_part = torch.empty(b, splits, H, shape.head_dim_v, dtype=torch.float32)
    lse_part = torch.empty(b, splits, H, dtype=torch.float32)
    status = lib.gqa_decode_cpu(
        DTYPE_CODES[q.dtype], q.data_ptr(), q.stride(0), q.stride(1),
        k_cache.data_ptr(), *k_cache.stride()[:3], v_cache.data_ptr(), *v_cache.stride()[:3],
        table.data_ptr(), table.stride(0), k_cache.shape[1], lengths.data_ptr(),
        b, splits, shape.num_kv_heads, shape.group_size, shape.head_dim, shape.head_dim_v, scale, threads,
        out_part.data_ptr(), lse_part.data_ptr())
    if status != 0:
        raise MemoryError("the C decode kernel could not allocate its per-thread workspace")
    lse_part.masked_fill_(lse_part <= NEG / 2, float("-inf"))
    if splits == 1:
        out.copy_(out_part[:, 0])
        return lse_part[:, 0]
    merged, lse = merge(out_part.transpose(0, 1), lse_part.transpose(0, 1))
    out.copy_(merged)
    return lse
