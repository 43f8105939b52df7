"""Settings whose values an existing install depends on."""

from __future__ import annotations

from pathlib import Path

from observatory.settings import Settings


def test_the_default_store_keeps_its_file_name(tmp_path: Path):
    # Stores made by every earlier release live at data_dir/observatory.db; renaming the file would
    # start every upgraded install on an empty store.
    settings = Settings(data_dir=tmp_path, database_url="")
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'observatory.db'}"
