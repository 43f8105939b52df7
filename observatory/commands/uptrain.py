"""``observatory uptrain``: the GQA uptraining claim measured at small scale on this machine."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import click

from observatory.settings import get_settings

EXIT_STOPPED = 3


@click.command("uptrain")
@click.option("--scale", type=float, default=1.0, show_default=True,
              help="Multiplies the steps (1: about ten minutes on two quiet cores; below 0.5: the seconds-long test "
                   "model; from 4 the model grows too).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Checkpoints and state; the same folder resumes a stopped run. "
                   "[default: DATA_DIR/uptrain/scale-S-seed-N]")
@click.option("--restart", is_flag=True, help="Discard what the work folder holds and start again.")
@click.option("--budget-min", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop (checkpointed, resumable) once this many minutes of wall time have passed.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="torch threads. 1 by default: on a shared machine torch's spinning thread pool makes two "
                   "threads several times slower than one.")
@click.option("--results", "results_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the results here (e.g. benchmarks/results/uptrain.json).")
@click.option("--no-store", is_flag=True, help="Do not write the run to the database.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected failure.")
def uptrain(scale: float, seed: int, work_dir: Path | None, restart: bool, budget_min: float | None, threads: int,
            results_path: Path | None, no_store: bool, no_progress: bool, as_json: bool, debug: bool) -> None:
    """Train a small MHA decoder on the Python standard library's source, convert it to K = H/2, H/4,
    H/8 and 1 with each pooling (mean, first, random), uptrain each for 0, 2.5, 5 and 10% of the
    original steps beside the MHA control, and report held-out perplexity, KV bytes per token and
    decode speed. Resumable: run the same command again after a stop. Exit 3: stopped early."""
    # torch and the experiment load only when a run starts, so the rest of the CLI starts quickly.
    import torch
    from tqdm import tqdm

    from observatory.store.db import get_engine, session_scope, upgrade
    from observatory.uptrain.corpus import CorpusError
    from observatory.uptrain.experiment import Hooks, WorkFolderError, results, run_experiment, total_steps
    from observatory.uptrain.plan import sizes
    from observatory.uptrain.report import table
    from observatory.uptrain.store import save_results, write_results_file
    from observatory.uptrain.train import Stopped

    try:
        s = sizes(scale)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    torch.set_num_threads(threads)
    settings = get_settings()
    work = work_dir or settings.data_dir / "uptrain" / f"scale-{scale:g}-seed-{seed}"
    deadline = time.monotonic() + budget_min * 60 if budget_min else None
    signalled: list[int] = []
    previous = {sig: signal.signal(sig, lambda number, frame: signalled.append(number))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    bar = tqdm(total=total_steps(s), desc="uptrain", unit=" step", file=sys.stderr,
               disable=True if no_progress or as_json else None)

    def progress(done: int, total: int, phase: str) -> None:
        bar.n = done
        bar.set_postfix_str(phase, refresh=False)
        bar.refresh()

    hooks = Hooks(progress=progress,
                  should_stop=lambda: bool(signalled) or (deadline is not None and time.monotonic() > deadline))
    stopped = None
    try:
        state = run_experiment(work, scale=scale, seed=seed, restart=restart, hooks=hooks)
    except Stopped as exc:
        stopped = exc
        state = json.loads((work / "state.json").read_text())
    except (WorkFolderError, CorpusError) as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:
        if debug:
            raise
        raise click.ClickException(f"uptrain failed: {type(exc).__name__}: {exc}") from None
    finally:
        bar.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    out = results(state) if state.get("base") else None
    if out is not None and not no_store:
        try:
            upgrade(settings.resolved_database_url)
            with session_scope(get_engine(settings)) as session:
                save_results(session, out)
        except Exception as exc:
            if debug:
                raise
            raise click.ClickException(f"the run is in {work}, but storing it failed: {exc}") from None
    if stopped is not None:
        why = "a signal" if signalled else f"the {budget_min:g}-minute budget"
        click.echo(f"uptrain: stopped by {why}; {work} holds the checkpoint: run the same command again to resume",
                   err=True)
        raise SystemExit(EXIT_STOPPED)
    if results_path is not None:
        write_results_file(results_path, out)
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
        return
    click.echo(table(out))
