"""``observatory uptrain`` at the test scale (seconds): the full grid, stored in a real SQLite file;
two runs agree within the stated tolerance, one of them stopped twice and resumed; the budget stops
a run resumably; our byte decoder is transformers' Llama (logits equal); the corpus splits by module."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from sqlmodel import Session, select

from observatory.cli import main
from observatory.uptrain.corpus import CorpusError, load_corpus, module_of, source_files
from observatory.uptrain.experiment import (
    Hooks,
    WorkFolderError,
    results,
    run_experiment,
)
from observatory.uptrain.model import ByteLlama, ModelShape, init_weights, save
from observatory.uptrain.plan import (
    CONTROL,
    DETERMINISM_TOLERANCE,
    FRACTIONS,
    METHODS,
    kv_grid,
)
from observatory.uptrain.store import latest_run, read_results_file, save_results
from observatory.uptrain.tables import UptrainCell
from observatory.uptrain.train import Stopped

SCALE = 0.03  # the test model: 40 base steps, 4 uptraining steps per run


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _perplexities(out: dict) -> dict:
    return {(c["method"], c["kv_heads"], c["fraction"]): c["perplexity"] for c in out["cells"]}


@pytest.mark.slow
def test_the_grid_completes_and_a_stopped_run_resumes_to_the_same_numbers(tmp_path, corpus):
    whole = results(run_experiment(tmp_path / "a", scale=SCALE, corpus=corpus))
    assert whole["complete"]
    assert sorted(_perplexities(whole)) == sorted(
        [(m, k, f) for m in METHODS for k in kv_grid() for f in FRACTIONS] + [(CONTROL, 16, f) for f in FRACTIONS])
    assert {c["kv_bytes_per_token"] for c in whole["cells"] if c["method"] == "mean"} == {
        2 * k * 2 * 1 * 2 for k in kv_grid()}  # K and V x K heads x d = 2 x 1 layer x 2 bytes
    assert all(c["decode_tokens_per_s"] > 0 and c["scored_bytes"] == 8 * 32 for c in whole["cells"])
    # 0%: conversion alone. Every cell of a pooling starts from the same converted weights, and the
    # control at 0% is the base model itself.
    control0 = next(c for c in whole["cells"] if c["method"] == CONTROL and c["fraction"] == 0)
    assert control0["loss"] == pytest.approx(whole["base"]["loss"], rel=1e-12)

    # Stop twice, once in the base run and once inside an uptraining run, then resume.
    ticks = [0]

    def stop_at(*marks):
        def should_stop():
            ticks[0] += 1
            return ticks[0] in marks
        return should_stop

    with pytest.raises(Stopped):
        run_experiment(tmp_path / "b", scale=SCALE, corpus=corpus, hooks=Hooks(should_stop=stop_at(17)))
    state = json.loads((tmp_path / "b" / "state.json").read_text())
    assert state["base"] is None and (tmp_path / "b" / "base.pt").exists()
    with pytest.raises(Stopped):
        run_experiment(tmp_path / "b", scale=SCALE, corpus=corpus, hooks=Hooks(should_stop=stop_at(17 + 50)))
    state = json.loads((tmp_path / "b" / "state.json").read_text())
    assert state["base"] is not None and not all(c["done"] for c in state["cells"].values())
    resumed = results(run_experiment(tmp_path / "b", scale=SCALE, corpus=corpus))
    assert resumed["complete"] and resumed["run_key"] == state["run_key"]
    a, b = _perplexities(whole), _perplexities(resumed)
    assert a.keys() == b.keys()
    worst = max(abs(a[key] - b[key]) / a[key] for key in a)
    assert worst <= DETERMINISM_TOLERANCE, worst


def test_a_work_folder_of_another_experiment_is_refused(tmp_path, corpus):
    with pytest.raises(Stopped):
        run_experiment(tmp_path, scale=SCALE, corpus=corpus, hooks=Hooks(should_stop=lambda: True))
    with pytest.raises(WorkFolderError, match="another experiment"):
        run_experiment(tmp_path, scale=SCALE, seed=1, corpus=corpus)


def test_the_command_stores_the_run_and_its_budget_stops_it_resumably(tmp_path, settings, engine):
    work, out = tmp_path / "work", tmp_path / "results.json"
    args = ["uptrain", "--scale", str(SCALE), "--work-dir", str(work), "--no-progress"]
    stopped = CliRunner().invoke(main, [*args, "--budget-min", "0.00001"])
    assert stopped.exit_code == 3, stopped.output
    assert "budget" in stopped.output and "run the same command again to resume" in stopped.output
    with Session(engine) as session:
        assert latest_run(session) is None  # an incomplete run is never shown as a result
    done = CliRunner().invoke(main, [*args, "--results", str(out)])
    assert done.exit_code == 0, done.output
    assert "held-out perplexity per byte" in done.output and "mean" in done.output
    with Session(engine) as session:
        stored = latest_run(session)
        assert stored["complete"] and len(stored["cells"]) == 52
        assert len(session.exec(select(UptrainCell)).all()) == 52
    from_file = read_results_file(out)
    assert _perplexities(from_file) == _perplexities(stored)
    # Saving the same run again replaces its cells rather than adding to them.
    with Session(engine) as session:
        save_results(session, from_file)
        assert len(session.exec(select(UptrainCell)).all()) == 52
    # The pages show the stored run (not the committed file) and judge the claim on it.
    from fastapi.testclient import TestClient

    from observatory.web.app import create_app

    with TestClient(create_app(settings)) as client:
        research = client.get("/research.json").json()
        assert research["ours"]["source"].startswith("the store") and research["ours"]["run_key"] == stored["run_key"]
        assert len(research["ours_rows"]) == 52 and research["ours"]["corpus"]["sha256"] == stored["corpus"]["sha256"]
        control = [r for r in research["ours_rows"] if r["method"] == CONTROL]
        assert [r["quality_change"] for r in control] == [0.0] * 4
        claim = next(c for c in client.get("/api/v1/claims").json()["claims"] if c["id"] == "gqa-uptraining")
        assert claim["verdict"] is not None and stored["run_key"][:8] in claim["steps"][-1]
        page = client.get("/research")
        assert page.status_code == 200 and "This observatory, small scale" in page.text
        assert 'data-chart="chart-uptrain"' in page.text


def test_bad_scale_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["uptrain", "--scale", "-1", "--work-dir", str(tmp_path)])
    assert result.exit_code == 1 and result.output.strip() == "Error: --scale must be a positive number, got -1.0"


def test_our_byte_decoder_is_transformers_llama(tmp_path):
    transformers = pytest.importorskip("transformers")
    shape = ModelShape(hidden=64, layers=2, heads=16, kv_heads=4, intermediate=96, context=32)
    ours = ByteLlama(shape)
    init_weights(ours, 5)
    save(ours, tmp_path)
    theirs = transformers.LlamaForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    tokens = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(ours.eval()(tokens), theirs(tokens).logits, atol=1e-5)


def test_the_corpus_splits_by_module_and_states_its_hash(tmp_path, corpus):
    assert corpus.train_modules > 100 and corpus.held_out_modules > 5
    assert corpus.held_out.numel() > 100_000 and corpus.train.numel() > 10 * corpus.held_out.numel() / 4
    assert load_corpus().sha256 == corpus.sha256
    files = source_files(__import__("pathlib").Path(corpus.root))
    assert not any("test" in p.parts or "site-packages" in p.parts for p in files)
    assert module_of(__import__("pathlib").Path("json/decoder.py")) == "json"
    (tmp_path / "only.py").write_text("x = 1\n")
    with pytest.raises(CorpusError, match="too few"):
        load_corpus(tmp_path)


@pytest.mark.slow
def test_sigterm_stops_at_a_checkpoint_and_the_run_resumes(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    work = tmp_path / "work"
    env = {**os.environ, "OBSERVATORY_DATA_DIR": str(tmp_path / "data")}
    from pathlib import Path

    command = [str(Path(sys.executable).parent / "observatory"), "uptrain", "--scale", str(SCALE), "--work-dir", str(work),
               "--no-progress", "--no-store"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Wait (bounded) for the first checkpoint: the base run then has 30 steps and the grid to go.
        for _ in range(600):
            if (work / "base.pt").exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 3, err
    assert "stopped by a signal" in err and "Traceback" not in err
    state = json.loads((work / "state.json").read_text())
    assert state["finished_at"] is None
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads((work / "state.json").read_text())["run_key"] == state["run_key"]
