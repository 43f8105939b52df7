"""``convert_checkpoint``: a safetensors checkpoint in, a converted one out, in bounded memory.

Tensors are read one at a time with ``safe_open`` and written in shards of at most
``max_shard_bytes``; memory holds one output shard and one input tensor. The output is built in a
temporary folder beside the destination and renamed into place at the end, so a failure leaves
nothing half written and never touches an existing destination. Files that are not weights
(tokenizer, generation config, README) are copied as they are.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from observatory.convert.pooling import RANDOM_SEED, pool_heads
from observatory.core.kv_conversion import (
    DEFAULT_MAX_SHARD_BYTES,
    ConversionRefused,
    converted_config,
    plan_conversion,
    shard_plan,
)

INDEX_NAME = "model.safetensors.index.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")


@dataclass(frozen=True)
class ConversionReport:
    destination: str
    method: str
    from_kv_heads: int
    to_kv_heads: int
    tensors: int
    pooled: int
    shards: int
    bytes_in: int
    bytes_out: int


def _source_shards(src: Path) -> dict[str, Path]:
    """Tensor name -> the shard file holding it."""
    index = src / INDEX_NAME
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConversionRefused(f"{index} is not a safetensors index: {exc}") from exc
        return {name: src / file for name, file in weight_map.items()}
    single = src / "model.safetensors"
    if single.is_file():
        with safe_open(single, framework="pt") as f:
            return {name: single for name in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    if any(src.glob("*.bin")) or any(src.glob("*.pt")):
        raise ConversionRefused(f"{src} holds pickled (.bin/.pt) weights only: convert needs safetensors")
    raise ConversionRefused(f"{src} has no model.safetensors or {INDEX_NAME}")


def _dtypes(shards: dict[str, Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(set(shards.values())):
        if not path.is_file():
            raise ConversionRefused(f"the index names {path.name}, which is not in the checkpoint")
        with safe_open(path, framework="pt") as f:
            for name in f.keys():  # noqa: SIM118
                if shards.get(name) == path:
                    out[name] = f.get_slice(name).get_dtype()
    missing = sorted(set(shards) - set(out))
    if missing:
        raise ConversionRefused(f"the index names {missing[0]} in a shard that does not hold it")
    return out


def read_config(src: Path) -> dict:
    path = src / "config.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConversionRefused(f"{src} has no config.json") from exc
    except ValueError as exc:
        raise ConversionRefused(f"{path} is not JSON: {exc}") from exc


def convert_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, kv_heads: int, method: str = "mean", *,
                       seed: int = RANDOM_SEED, max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
                       progress: Callable[[str], None] | None = None) -> ConversionReport:
    """Convert the checkpoint in folder ``src`` to ``kv_heads`` KV heads into the new folder ``dst``."""
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise ConversionRefused(f"{src} is not a folder")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise ConversionRefused(f"{dst} exists and is not empty: choose a new destination")
    config = read_config(src)
    shards = _source_shards(src)
    dtypes = _dtypes(shards)
    plan = plan_conversion(config, dtypes, kv_heads, method)
    kv = set(plan.kv_tensors)
    generator = torch.Generator().manual_seed(seed)
    # Output sizes are known before reading a byte of weights: a pooled projection shrinks by pool.
    sizes = []
    for name in sorted(dtypes):
        with safe_open(shards[name], framework="pt") as f:
            shape = f.get_slice(name).get_shape()
        count = 1
        for dim in shape:
            count *= dim
        itemsize = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}[dtypes[name]]
        sizes.append((name, count * itemsize // (plan.pool if name in kv else 1)))
    layout = shard_plan(sizes, max_shard_bytes)
    dst.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        weight_map, bytes_in, bytes_out, pooled = {}, 0, 0, 0
        for number, names in enumerate(layout, start=1):
            file = "model.safetensors" if len(layout) == 1 else f"model-{number:05d}-of-{len(layout):05d}.safetensors"
            out: dict[str, torch.Tensor] = {}
            for name in names:
                with safe_open(shards[name], framework="pt") as f:
                    tensor = f.get_tensor(name)
                bytes_in += tensor.numel() * tensor.element_size()
                if name in kv:
                    tensor = pool_heads(tensor, plan, generator=generator)
                    pooled += 1
                out[name] = tensor.contiguous()
                bytes_out += tensor.numel() * tensor.element_size()
                weight_map[name] = file
            save_file(out, work / file, metadata={"format": "pt"})
            del out
            if progress:
                progress(f"shard {number}/{len(layout)} written")
        if len(layout) > 1:
            (work / INDEX_NAME).write_text(json.dumps(
                {"metadata": {"total_size": bytes_out}, "weight_map": dict(sorted(weight_map.items()))}, indent=2))
        (work / "config.json").write_text(json.dumps(converted_config(config, plan), indent=2) + "\n")
        for extra in sorted(src.iterdir()):
            if extra.is_file() and extra.name != "config.json" and extra.name != INDEX_NAME \
                    and not extra.name.endswith(WEIGHT_SUFFIXES):
                shutil.copy2(extra, work / extra.name)
        if dst.exists():
            dst.rmdir()
        work.rename(dst)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return ConversionReport(destination=str(dst), method=method, from_kv_heads=plan.old_kv_heads,
                            to_kv_heads=plan.new_kv_heads, tensors=len(weight_map), pooled=pooled,
                            shards=len(layout), bytes_in=bytes_in, bytes_out=bytes_out)
