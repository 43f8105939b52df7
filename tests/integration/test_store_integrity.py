"""store.integrity.check_writable on real SQLite files: sound, damaged, and out of time."""

from __future__ import annotations

import shutil

import pytest
from store_support import damage, snapshot_store

from observatory.store.db import make_engine
from observatory.store.integrity import StoreCorrupt, check_writable

TABLES = ("hub_model", "config_revision", "geometry")


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    return snapshot_store(tmp_path_factory.mktemp("base") / "base.db")


def _engine(path):
    return make_engine(f"sqlite:///{path}")


def test_a_sound_store_passes_and_a_damaged_one_is_refused(base_store, tmp_path):
    path = tmp_path / "store.db"
    shutil.copy(base_store, path)
    engine = _engine(path)
    assert check_writable(engine, TABLES) is True
    engine.dispose()

    damage(path, "ix_hub_model_created_at_id")  # an index of a table the crawl writes
    engine = _engine(path)
    with pytest.raises(StoreCorrupt, match="damaged"):
        check_writable(engine, TABLES)
    engine.dispose()


def test_the_check_stops_at_its_budget_and_says_so(base_store, tmp_path, caplog):
    path = tmp_path / "store.db"
    shutil.copy(base_store, path)
    engine = _engine(path)
    assert check_writable(engine, TABLES, budget_s=0.0) is False  # ran out of time: not a verdict
    assert "without finding damage" in caplog.text
    assert check_writable(engine, TABLES) is True  # the progress handler is gone afterwards
    engine.dispose()
