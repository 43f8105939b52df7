"""The whole experiment, resumable: train the MHA base, convert it with each pooling to each K with
``observatory.convert``, uptrain every conversion and the MHA control, evaluate at 0, 2.5, 5 and
10% of the base steps, then time each K's decode attention with the bundled kernel.

Everything lives in a work folder: ``state.json`` (the configuration, what is finished, every
evaluation so far), the base checkpoint and one per uptraining run. Run the same command again
and it continues where it stopped; a kill loses at most ``checkpoint_every`` steps. A different
scale, seed or corpus in the same folder is refused rather than mixed.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import torch

from observatory.convert.checkpoint import convert_checkpoint
from observatory.core.geometry import parse_geometry
from observatory.core.kvcache import bytes_per_token
from observatory.uptrain import model as byte_model
from observatory.uptrain.corpus import Corpus, load_corpus
from observatory.uptrain.plan import (
    CONTROL,
    DETERMINISM_TOLERANCE,
    FRACTIONS,
    Sizes,
    cells,
    kv_grid,
    lr_at,
    sizes,
    uptrain_lr,
    uptrain_steps,
)
from observatory.uptrain.speed import decode_speeds
from observatory.uptrain.train import (
    Stopped,
    batch,
    evaluate,
    held_out_windows,
    load_checkpoint,
    optimizer,
    run_steps,
)

STATE_VERSION = 1
KV_DTYPE = "bf16"  # KV bytes per token at 2 B per element, the convention of every page


class WorkFolderError(ValueError):
    """The work folder holds another experiment, or is unreadable."""


@dataclass
class Hooks:
    """How the experiment reports and is stopped: progress (steps done, total, phase), a stop
    request (budget or signal), and the clock (injected so the command owns wall time)."""

    progress: Callable[[int, int, str], None] = lambda done, total, phase: None
    should_stop: Callable[[], bool] = lambda: False
    clock: Callable[[], float] = time.monotonic
    steps_done: int = field(default=0)


def cell_key(method: str, kv_heads: int) -> str:
    return f"{method}-k{kv_heads}"


def total_steps(s: Sizes) -> int:
    return s.steps + len(cells()) * uptrain_steps(s.steps, FRACTIONS[-1])


def _write_json(path: Path, data: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)


def _fresh_state(s: Sizes, seed: int, corpus: Corpus) -> dict:
    return {"version": STATE_VERSION, "run_key": str(uuid.uuid4()), "scale": s.scale, "seed": seed,
            "corpus": corpus.describe(), "sizes": s.describe(), "started_at": datetime.now(UTC).isoformat(),
            "finished_at": None, "wall_s": 0.0, "base": None, "cells": {}, "speed": None,
            "software": {"python": platform.python_version(), "torch": torch.__version__,
                         "threads": torch.get_num_threads(), "machine": platform.machine(),
                         "processor": platform.processor() or None}}


def _open_state(work: Path, s: Sizes, seed: int, corpus: Corpus, restart: bool) -> dict:
    path = work / "state.json"
    if restart and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        state = _fresh_state(s, seed, corpus)
        _write_json(path, state)
        return state
    try:
        state = json.loads(path.read_text())
    except ValueError as exc:
        raise WorkFolderError(f"{path} is not JSON ({exc}); use --restart or another --work-dir") from exc
    found = (state.get("version"), state.get("scale"), state.get("seed"), (state.get("corpus") or {}).get("sha256"))
    wanted = (STATE_VERSION, s.scale, seed, corpus.sha256)
    if found != wanted:
        raise WorkFolderError(f"{work} holds another experiment (version, scale, seed, corpus = {found}, not "
                              f"{wanted}): use --restart to discard it, or another --work-dir")
    return state


def _kv_bytes(folder: Path) -> int:
    return bytes_per_token(parse_geometry(json.loads((folder / "config.json").read_text())), KV_DTYPE)


def run_experiment(work: Path, *, scale: float = 1.0, seed: int = 0, restart: bool = False,
                   hooks: Hooks | None = None, corpus: Corpus | None = None) -> dict:
    """Run (or resume) the experiment in ``work``; return the state, ``finished_at`` set when the
    grid and the speed table are complete. Raises ``Stopped`` when stopped early (state saved)."""
    hooks = hooks or Hooks()
    s = sizes(scale)
    corpus = corpus or load_corpus()
    state = _open_state(work, s, seed, corpus, restart)
    started = hooks.clock()
    total = total_steps(s)
    done = [0]

    def save() -> None:
        state["wall_s"] = round(state.get("_wall_before", state["wall_s"]) + hooks.clock() - started, 3)
        _write_json(work / "state.json", {k: v for k, v in state.items() if not k.startswith("_")})

    state["_wall_before"] = state["wall_s"]

    def tick(phase: str) -> Callable[[], None]:
        def advance() -> None:
            done[0] += 1
            hooks.progress(done[0], total, phase)
        return advance

    windows = held_out_windows(corpus.held_out, s.eval_windows, s.shape.context)
    up_total = uptrain_steps(s.steps, FRACTIONS[-1])
    torch.manual_seed(seed)
    try:
        base_dir = work / "base"
        if state["base"] is None:
            model = byte_model.ByteLlama(s.shape)
            byte_model.init_weights(model, seed)
            opt = optimizer(model, s.lr)
            checkpoint = work / "base.pt"
            start = load_checkpoint(checkpoint, model, opt) if checkpoint.exists() else 0
            done[0] = start
            hooks.progress(done[0], total, "base")
            run_steps(model, opt, start=start, end=s.steps, lr=lambda i: lr_at(i, s),
                      data_step=lambda i: batch(corpus.train, seed, i, s.batch, s.shape.context),
                      checkpoint=checkpoint, checkpoint_every=s.checkpoint_every, should_stop=hooks.should_stop,
                      tick=tick("base"))
            if base_dir.exists():
                shutil.rmtree(base_dir)
            byte_model.save(model, base_dir)
            result = evaluate(model, windows)
            state["base"] = {"steps": s.steps, "loss": result.loss, "scored_bytes": result.scored_bytes}
            save()
        done[0] = s.steps
        for method, k in cells():
            key = cell_key(method, k)
            cell = state["cells"].setdefault(key, {"method": method, "kv_heads": k, "evals": {}, "done": False})
            if cell["done"]:
                done[0] += up_total
                continue
            folder = work / "cells" / key
            if not (folder / "config.json").exists():
                if folder.exists():
                    shutil.rmtree(folder)
                if method == CONTROL:
                    shutil.copytree(base_dir, folder)
                else:
                    convert_checkpoint(base_dir, folder, k, method, seed=seed)
            model = byte_model.load(folder)
            opt = optimizer(model, uptrain_lr(s))
            checkpoint = work / "cells" / f"{key}.pt"
            step = load_checkpoint(checkpoint, model, opt) if checkpoint.exists() else 0
            done[0] += step
            cell["kv_bytes_per_token"] = _kv_bytes(folder)
            for fraction in FRACTIONS:
                target = uptrain_steps(s.steps, fraction)
                label = f"{fraction:g}"
                if label in cell["evals"] and step >= target:
                    continue
                run_steps(model, opt, start=step, end=target, lr=lambda i: uptrain_lr(s),
                          data_step=lambda i: batch(corpus.train, seed, s.steps + i, s.batch, s.shape.context),
                          checkpoint=checkpoint, checkpoint_every=s.checkpoint_every,
                          should_stop=hooks.should_stop, tick=tick(key))
                step = target
                result = evaluate(model, windows)
                cell["evals"][label] = {"fraction": fraction, "uptrain_steps": target, "loss": result.loss,
                                        "scored_bytes": result.scored_bytes}
                save()
            cell["done"] = True
            save()
        if state["speed"] is None:
            if hooks.should_stop():
                raise Stopped(done[0])
            hooks.progress(done[0], total, "decode speed")
            state["speed"] = decode_speeds(s.shape.heads, [s.shape.heads, *kv_grid()], s.shape.head_dim,
                                           s.shape.layers, s.decode_context, s.decode_batch, seed=seed)
        state["finished_at"] = datetime.now(UTC).isoformat()
    finally:
        save()
    return state


def results(state: dict) -> dict:
    """The state as the results file, the store and the pages carry it: one row per cell."""
    s = state["sizes"]
    heads = s["shape"]["heads"]
    speed = (state.get("speed") or {}).get("by_kv_heads", {})
    rows = []
    for cell in state["cells"].values():
        for ev in sorted(cell["evals"].values(), key=lambda e: e["fraction"]):
            timing = speed.get(str(cell["kv_heads"]), {})
            rows.append({"method": cell["method"], "kv_heads": cell["kv_heads"],
                         "group_size": heads // cell["kv_heads"], "fraction": ev["fraction"],
                         "uptrain_steps": ev["uptrain_steps"], "loss": ev["loss"],
                         "perplexity": math.exp(ev["loss"]),
                         "bits_per_byte": ev["loss"] / math.log(2), "scored_bytes": ev["scored_bytes"],
                         "kv_bytes_per_token": cell.get("kv_bytes_per_token"),
                         "decode_tokens_per_s": timing.get("tokens_per_s")})
    base = state.get("base") or {}
    return {"run_key": state["run_key"], "complete": state.get("finished_at") is not None,
            "started_at": state["started_at"], "finished_at": state.get("finished_at"), "wall_s": state["wall_s"],
            "scale": state["scale"], "seed": state["seed"], "corpus": state["corpus"], "sizes": s,
            "software": state["software"], "base": {**base, "perplexity": math.exp(base["loss"])}
            if base else None, "speed": state.get("speed"), "determinism_tolerance": DETERMINISM_TOLERANCE,
            "kv_dtype": KV_DTYPE, "cells": rows}
