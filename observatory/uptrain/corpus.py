"""The corpus every machine has: the Python standard library's own source files.

Files are the ``.py`` files under ``sysconfig``'s stdlib folder, leaving out ``site-packages`` and
the test suites (``test``/``tests``/``idle_test`` folders: much of them is generated data). They are
split by top-level module (``json/decoder.py`` belongs to ``json``), never by file, so the held-out
set is code from modules the model never saw: a module is held out when the first byte of the
SHA-256 of its name is below ``HELD_OUT_BELOW`` (about one module in ten), the same on every machine.
The corpus hash covers every file's path and bytes, so a run states exactly what it read; a different
Python version reads a different corpus and says so.
"""

from __future__ import annotations

import hashlib
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

SKIPPED_FOLDERS = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"})
HELD_OUT_BELOW = 26  # of 256: about 10% of modules
SEPARATOR = b"\n\n"  # between files, so no window straddles two files without a break


class CorpusError(ValueError):
    """The corpus cannot be read (no stdlib folder, or one split is empty)."""


@dataclass(frozen=True)
class Corpus:
    root: str
    python: str
    sha256: str
    files: int
    train_modules: int
    held_out_modules: int
    train: torch.Tensor  # uint8 bytes
    held_out: torch.Tensor

    def describe(self) -> dict:
        return {"root": self.root, "python": self.python, "sha256": self.sha256, "files": self.files,
                "train_modules": self.train_modules, "held_out_modules": self.held_out_modules,
                "train_bytes": int(self.train.numel()), "held_out_bytes": int(self.held_out.numel()),
                "split": f"by top-level module: held out when sha256(name)[0] < {HELD_OUT_BELOW}"}


def module_of(relative: Path) -> str:
    return relative.parts[0].removesuffix(".py")


def held_out(module: str) -> bool:
    return hashlib.sha256(module.encode()).digest()[0] < HELD_OUT_BELOW


def source_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py")
                  if p.is_file() and not SKIPPED_FOLDERS.intersection(p.relative_to(root).parts[:-1]))


def load_corpus(root: Path | None = None) -> Corpus:
    root = Path(root or sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise CorpusError(f"the standard library folder {root} does not exist")
    digest = hashlib.sha256()
    parts: dict[bool, list[bytes]] = {False: [], True: []}
    modules: dict[bool, set[str]] = {False: set(), True: set()}
    files = source_files(root)
    for path in files:
        relative = path.relative_to(root)
        data = path.read_bytes()
        digest.update(relative.as_posix().encode() + b"\0" + hashlib.sha256(data).digest())
        module = module_of(relative)
        side = held_out(module)
        parts[side].append(data)
        modules[side].add(module)
    if not parts[False] or not parts[True]:
        raise CorpusError(f"{root} has {len(files)} source files: too few to split into train and held-out sets")

    def tensor(chunks: list[bytes]) -> torch.Tensor:
        return torch.frombuffer(bytearray(SEPARATOR.join(chunks)), dtype=torch.uint8)

    return Corpus(root=str(root), python=sys.version.split()[0], sha256=digest.hexdigest(), files=len(files),
                  train_modules=len(modules[False]), held_out_modules=len(modules[True]),
                  train=tensor(parts[False]), held_out=tensor(parts[True]))
