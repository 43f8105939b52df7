"""All configuration in one place, read from the environment.

Observatory settings use the ``OBSERVATORY_`` prefix; the Hub endpoint and token keep the
standard ``HF_ENDPOINT`` / ``HF_TOKEN`` names so the same shell works for ``huggingface_hub``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATA_DIR = Path.home() / ".local" / "share" / "gqa-observatory"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OBSERVATORY_", extra="ignore")

    # Where the SQLite file (and other local state) lives unless database_url says otherwise.
    data_dir: Path = DEFAULT_DATA_DIR
    # Empty means "SQLite file observatory.db inside data_dir"; any SQLAlchemy URL works
    # (postgresql+psycopg://... when one machine is not enough).
    database_url: str = ""

    hf_endpoint: str = Field(
        default="https://huggingface.co",
        validation_alias=AliasChoices("HF_ENDPOINT", "OBSERVATORY_HF_ENDPOINT"),
    )
    hf_token: str | None = Field(
        default=None, validation_alias=AliasChoices("HF_TOKEN", "OBSERVATORY_HF_TOKEN")
    )

    # Web service
    host: str = "127.0.0.1"
    port: int = 8000
    base_url: str = ""  # public URL used in feeds and alert links; empty = derive from request
    # Load the bundled snapshot automatically when the store holds no models yet.
    autoload_snapshot: bool = True

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'observatory.db'}"


@lru_cache
def get_settings() -> Settings:
    return Settings()
