"""The hardware catalog: accelerators with memory, bandwidth and dense throughput, each with sources.

The catalog is data (``observatory/catalog/data/hardware.json``); this module only loads and checks it.
Throughput is always the dense figure: vendors headline 2:4-sparse numbers, twice as large.

A device has one memory tier (``memory_bytes`` at ``bandwidth_bytes_per_s``) unless its entry lists
``memory_tiers`` (SRAM-first chips: on-chip SRAM, and off-chip DRAM where it has any); then
``memory_bytes`` is their sum and ``bandwidth_bytes_per_s`` the fastest tier's, and the entry
must not state them itself (two places for one number would drift apart).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

from observatory.catalog.files import read_json
from observatory.core import capacity
from observatory.core.tiers import MemoryTier

CATALOG_PATH = Path(__file__).parent / "data" / "hardware.json"


class CatalogError(ValueError):
    """The catalog file is malformed; the message names the device and field."""


@dataclass(frozen=True)
class Source:
    url: str
    note: str


@dataclass(frozen=True)
class Device:
    id: str
    name: str
    vendor: str
    kind: str
    memory_bytes: int
    bandwidth_bytes_per_s: float
    bf16_dense_flops: float | None
    fp8_dense_flops: float | None
    released: date
    released_note: str = ""
    memory_note: str = ""
    flops_note: str = ""
    sources: tuple[Source, ...] = ()
    memory_tiers: tuple[MemoryTier, ...] = ()  # fastest first; one tier unless the entry lists several
    tier_notes: tuple[str, ...] = ()  # per tier, what the source says of it

    @property
    def on_chip_bytes(self) -> int:
        return sum(t.bytes for t in self.memory_tiers if t.on_chip)

    @property
    def sram_first(self) -> bool:
        """On-chip SRAM is where this chip keeps weights and cache, not a cache in front of DRAM."""
        return self.on_chip_bytes > 0

    def peak_flops(self, dtype: str = "bf16") -> float | None:
        """Dense matrix throughput for ``dtype``; FP8 falls back to BF16 where a chip has no FP8 path,
        FP16 is BF16's rate; None where nothing is published (the roofline then ignores compute)."""
        if dtype == "fp8":
            return self.fp8_dense_flops or self.bf16_dense_flops
        return self.bf16_dense_flops

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "vendor": self.vendor, "kind": self.kind,
            "memory_bytes": self.memory_bytes, "memory_note": self.memory_note,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "bf16_dense_flops": self.bf16_dense_flops, "fp8_dense_flops": self.fp8_dense_flops,
            "flops_note": self.flops_note, "released": self.released.isoformat(),
            "released_note": self.released_note,
            "sources": [{"url": s.url, "note": s.note} for s in self.sources],
            "memory_tiers": [{"name": t.name, "bytes": t.bytes, "bandwidth_bytes_per_s": t.bandwidth_bytes_per_s,
                              "on_chip": t.on_chip, "note": note}
                             for t, note in zip(self.memory_tiers, self.tier_notes)],
            "on_chip_bytes": self.on_chip_bytes,
        }


def parse_catalog(data: Any) -> tuple[Device, ...]:
    """Check a decoded catalog and build its devices; raises ``CatalogError``."""
    if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        raise CatalogError("catalog must be an object with a 'devices' list")
    devices, seen = [], set()
    for index, entry in enumerate(data["devices"]):
        where = f"device #{index}"
        if not isinstance(entry, dict):
            raise CatalogError(f"{where}: not an object")
        where = f"device {entry.get('id', index)!r}"
        for key in ("id", "name", "vendor", "kind"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise CatalogError(f"{where}: {key} must be a non-empty string")
        if entry["id"] in seen:
            raise CatalogError(f"{where}: duplicate id")
        seen.add(entry["id"])
        tiers, notes = _tiers(entry, where)
        memory, bandwidth = sum(t.bytes for t in tiers), tiers[0].bandwidth_bytes_per_s
        bf16 = _number(entry, "bf16_dense_flops", where)
        fp8 = _number(entry, "fp8_dense_flops", where)
        try:
            released = date.fromisoformat(entry.get("released"))
        except (TypeError, ValueError):
            raise CatalogError(f"{where}: released must be an ISO date, got {entry.get('released')!r}") from None
        sources = entry.get("sources")
        if not isinstance(sources, list) or not sources or not all(
                isinstance(s, dict) and isinstance(s.get("url"), str) and s["url"].startswith("https://")
                for s in sources):
            raise CatalogError(f"{where}: sources must be a non-empty list of {{url: https://..., note}}")
        devices.append(Device(
            id=entry["id"], name=entry["name"], vendor=entry["vendor"], kind=entry["kind"],
            memory_bytes=int(memory), bandwidth_bytes_per_s=float(bandwidth),
            bf16_dense_flops=bf16, fp8_dense_flops=fp8, released=released,
            released_note=str(entry.get("released_note", "")), memory_note=str(entry.get("memory_note", "")),
            flops_note=str(entry.get("flops_note", "")),
            sources=tuple(Source(s["url"], str(s.get("note", ""))) for s in sources),
            memory_tiers=tiers, tier_notes=notes))
    return tuple(devices)


def _tiers(entry: dict, where: str) -> tuple[tuple[MemoryTier, ...], tuple[str, ...]]:
    """The entry's memory tiers, fastest first: its ``memory_tiers`` list, else one tier."""
    listed = entry.get("memory_tiers")
    if listed is None:
        memory = _number(entry, "memory_bytes", where, required=True)
        bandwidth = _number(entry, "bandwidth_bytes_per_s", where, required=True)
        return (MemoryTier("memory", int(memory), bandwidth),), (str(entry.get("memory_note", "")),)
    stated = [key for key in ("memory_bytes", "bandwidth_bytes_per_s") if key in entry]
    if stated:
        raise CatalogError(f"{where}: with memory_tiers, {' and '.join(stated)} come from the tiers; remove them")
    if not isinstance(listed, list) or not listed:
        raise CatalogError(f"{where}: memory_tiers must be a non-empty list")
    tiers, names = [], set()
    for i, tier in enumerate(listed):
        at = f"{where}, memory_tiers[{i}]"
        if not isinstance(tier, dict) or not isinstance(tier.get("name"), str) or not tier["name"]:
            raise CatalogError(f"{at}: must be an object with a non-empty name")
        if tier["name"] in names:
            raise CatalogError(f"{at}: duplicate tier name {tier['name']!r}")
        names.add(tier["name"])
        if not isinstance(tier.get("on_chip"), bool):
            raise CatalogError(f"{at}: on_chip must be true or false")
        size = _number(tier, "bytes", at, required=True)
        speed = _number(tier, "bandwidth_bytes_per_s", at, required=True)
        tiers.append((MemoryTier(tier["name"], int(size), speed, tier["on_chip"]), str(tier.get("note", ""))))
    tiers.sort(key=lambda pair: -pair[0].bandwidth_bytes_per_s)
    return tuple(t for t, _ in tiers), tuple(n for _, n in tiers)


def _number(entry: dict, key: str, where: str, *, required: bool = False) -> float | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise CatalogError(f"{where}: {key} must be a positive number{'' if required else ' or null'}, got {value!r}")
    return float(value)


@lru_cache
def load_catalog(path: Path = CATALOG_PATH) -> tuple[Device, ...]:
    return parse_catalog(read_json(path, CatalogError, "hardware catalog"))


@lru_cache
def catalog_version(path: Path = CATALOG_PATH) -> str:
    """The catalog file's sha256 (first 16 hex digits): estimates kept beside a geometry name the
    catalog they were computed from, so an edited catalog never serves old numbers."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def get_device(device_id: str, devices: tuple[Device, ...] | None = None) -> Device:
    for device in devices or load_catalog():
        if device.id == device_id:
            return device
    known = ", ".join(d.id for d in devices or load_catalog())
    raise KeyError(f"unknown device {device_id!r}; known: {known}")


# CUDA reports names such as "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H200",
# "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"; first match wins.
_CUDA_NAMES = (
    (r"\bH100\b.*\bPCIe\b", "h100-pcie"),
    (r"\bH100\b", "h100-sxm"),
    (r"\bH200\b", "h200-sxm"),
    (r"\bGB200\b", "gb200"),
    (r"\bB200\b", "b200"),
    (r"\bA100\b.*80\s*GB", "a100-80gb-sxm"),
    (r"\bL40S\b", "l40s"),
    (r"\bL4\b", "l4"),
    (r"\bRTX 4090\b", "rtx-4090"),
    (r"\bMI300X\b", "mi300x"),
    (r"\bMI325X\b", "mi325x"),
)


def match_device(reported_name: str, devices: tuple[Device, ...] | None = None) -> Device | None:
    """The catalog entry for a device name as the driver reports it, or None (CPUs, unknown parts)."""
    for pattern, device_id in _CUDA_NAMES:
        if re.search(pattern, reported_name, flags=re.IGNORECASE):
            return get_device(device_id, devices)
    return None


def device_memories(devices: tuple[Device, ...] | None = None) -> list[capacity.DeviceMemory]:
    """The catalog as ``core.capacity`` reads it: each device's memory and release date."""
    return [capacity.DeviceMemory(d.id, d.name, d.released, d.memory_bytes, d.on_chip_bytes)
            for d in devices or load_catalog()]
