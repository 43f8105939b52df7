"""The bundled snapshot: notable open models 2018-2026, so a fresh install has real data offline.

``data/snapshot.json`` lists each model with its organisation, family, release date (with its
source and a confidence), parameter count (with its kind and source) and its config:

- ``verbatim``: a real config.json in ``data/configs/`` (``config_file``), copied byte for byte
  from a public repository (``source_repo``, ``source_path``, ``source_commit``); ``copy`` says
  whether that copy is the Hub's file (``hub_hash_check``: its sha256 matched a published list
  of Hub hashes) or one the vendoring project edited.
- ``transcribed``: a config rebuilt from something that shows it rather than copied as a file:
  code that embeds it as a Python dict, or the text of the repo's Hub pages. The values are the
  publisher's; the bytes are the Hub's only where ``hub_hash_check`` says the sha256 matched (then
  ``source_*`` names the published hash list).
- ``reconstructed``: the published geometry written as a minimal config dict (``config``),
  only where no copy could be found anywhere public (``searched`` says where we looked).

Every entry is an original release (``relation: original``). Entries whose config is
byte-identical to another's name it in ``same_architecture_as`` (different weights, one
architecture: DeepSeek-V3 and R1). All go through the crawler's write path
(``ingest.record_config``), so one parser derives every geometry.

Loading is idempotent. A revision's sha is ``snapshot-v1:<sha1 of its raw text>``: loading the
same data again finds every revision already there, and an edited entry becomes a new revision.

Crawled data wins. When the store already holds a model from the Hub (source "hub"), its Hub
fields are left alone, and the snapshot revision is added only while the model has no revision
of its own from the Hub; once a crawl records a real config for a model, later loads never
put a snapshot revision in front of it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from observatory.core.repo_ids import InvalidRepoId, validate_repo_id
from observatory.settings import Settings, get_settings
from observatory.store.db import read_session, session_scope
from observatory.store.ingest import record_config, upsert_model
from observatory.store.tables import ConfigRevision, HubModel, utcnow

DATA_DIR = Path(__file__).resolve().parent / "data"
SNAPSHOT_PATH = DATA_DIR / "snapshot.json"
CONFIGS_DIR = DATA_DIR / "configs"

SNAPSHOT_VERSION = 2
SHA_PREFIX = "snapshot-v1:"  # of the raw text: unchanged by the manifest's format
_ANY_SNAPSHOT_SHA = "snapshot%"  # every snapshot format's revisions, as opposed to Hub commit shas
PROVENANCES = ("verbatim", "transcribed", "reconstructed")
FILE_PROVENANCES = ("verbatim", "transcribed")  # entries with a config_file
CONFIDENCES = ("high", "medium", "low")
PARAMETER_KINDS = ("safetensors total", "model card", "paper", "announcement", "config estimate")
DEFAULT_PIPELINE_TAG = "text-generation"
EARLIEST_RELEASE = date(2017, 1, 1)

_REQUIRED = ("id", "organisation", "family", "release_date", "release_date_confidence", "release_date_source",
             "provenance")
_OPTIONAL = ("num_parameters", "num_parameters_kind", "num_parameters_source", "active_parameters",
             "active_parameters_source", "config", "config_file", "source_repo", "source_path", "source_commit",
             "source", "copy", "hub_hash_check", "same_architecture_as", "searched", "notes", "pipeline_tag")
_MAX_SOURCE = 500  # ConfigRevision.source
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class SnapshotError(ValueError):
    """The snapshot manifest (or a file it names) is unusable; nothing was loaded."""


@dataclass(frozen=True)
class SnapshotEntry:
    id: str
    organisation: str
    family: str
    release_date: date
    release_date_confidence: str
    release_date_source: str
    num_parameters: int | None
    provenance: str
    source: str  # a URL: the vendored copy's blob at its commit, or where the geometry was published
    raw_text: str
    config_file: str | None = None
    pipeline_tag: str = DEFAULT_PIPELINE_TAG
    notes: str | None = None
    num_parameters_kind: str | None = None
    num_parameters_source: str | None = None
    active_parameters: int | None = None
    active_parameters_source: str | None = None
    source_repo: str | None = None
    source_path: str | None = None
    source_commit: str | None = None
    copy: str | None = None
    hub_hash_check: str | None = None
    same_architecture_as: tuple[str, ...] = ()
    searched: str | None = None

    META_FIELDS = ("family", "release_date_source", "num_parameters_kind", "num_parameters_source",
                   "active_parameters_source", "source_repo", "source_path", "source_commit", "copy",
                   "hub_hash_check", "same_architecture_as", "searched", "notes")

    @property
    def sha(self) -> str:
        return SHA_PREFIX + hashlib.sha1(self.raw_text.encode("utf-8")).hexdigest()

    @property
    def created_at(self) -> datetime:
        return datetime(self.release_date.year, self.release_date.month, self.release_date.day, tzinfo=timezone.utc)

    def model_fields(self) -> dict:
        """The HubModel fields a snapshot row carries (Hub-only fields stay at their defaults)."""
        tags = ["snapshot"]
        model_type = _top_level_model_type(self.raw_text)
        if model_type:
            tags.append(model_type)
        return {
            "created_at": self.created_at,
            "pipeline_tag": self.pipeline_tag,
            "library_name": "transformers",
            "tags": tags,
            "num_parameters": self.num_parameters,
            "parameters_source": (None if self.num_parameters is None else
                                  "safetensors" if self.num_parameters_kind == "safetensors total" else "published"),
            "active_parameters": self.active_parameters,
            "relation": "original",  # the snapshot lists labs' own releases, never derivatives
            "organisation": self.organisation,
            "snapshot_meta": {name: _plain(getattr(self, name)) for name in self.META_FIELDS},
            "source": "snapshot",
            "release_date_confidence": self.release_date_confidence,
        }


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def reconstructed_text(config: dict) -> str:
    """The raw text stored for a reconstructed entry: its config dict as indented JSON."""
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def _top_level_model_type(raw_text: str) -> str | None:
    try:
        value = json.loads(raw_text).get("model_type")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and 0 < len(value) <= 100 else None


def load_entries(path: Path | None = None, configs_dir: Path | None = None) -> list[SnapshotEntry]:
    """Read and validate a snapshot manifest; raise SnapshotError naming every problem found."""
    path = Path(path) if path is not None else SNAPSHOT_PATH
    configs_dir = Path(configs_dir) if configs_dir is not None else (
        CONFIGS_DIR if path == SNAPSHOT_PATH else path.parent / "configs"
    )
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SnapshotError(f"snapshot {path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), list):
        raise SnapshotError(f"snapshot {path} must be a JSON object with a 'models' list")
    if doc.get("snapshot_version") != SNAPSHOT_VERSION:
        raise SnapshotError(
            f"snapshot {path} has snapshot_version {doc.get('snapshot_version')!r}; "
            f"this version reads {SNAPSHOT_VERSION}"
        )

    entries: list[SnapshotEntry] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(doc["models"]):
        label = f"models[{index}]"
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            label += f" ({raw['id'][:80]})"
        try:
            entry = _entry(raw, configs_dir)
        except SnapshotError as exc:
            problems.append(f"{label}: {exc}")
            continue
        if entry.id in seen:
            problems.append(f"{label}: duplicate id")
            continue
        seen.add(entry.id)
        entries.append(entry)
    if problems:
        shown = "; ".join(problems[:5])
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        noun = "entry" if len(problems) == 1 else "entries"
        raise SnapshotError(f"snapshot {path}: {len(problems)} bad {noun}: {shown}{more}")
    return entries


def _entry(raw: object, configs_dir: Path) -> SnapshotEntry:
    if not isinstance(raw, dict):
        raise SnapshotError("entry must be a JSON object")
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        raise SnapshotError(f"missing {', '.join(missing)}")
    unknown = sorted(set(raw) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise SnapshotError(f"unknown key(s) {', '.join(unknown)}")
    try:
        model_id = validate_repo_id(raw["id"])
    except InvalidRepoId as exc:
        raise SnapshotError(str(exc)) from None
    release = _release_date(raw["release_date"])
    confidence = raw["release_date_confidence"]
    if confidence not in CONFIDENCES:
        raise SnapshotError(f"release_date_confidence must be one of {', '.join(CONFIDENCES)}")
    for key in ("family", "organisation", "release_date_source"):
        _text(raw, key, required=True)
    for key in ("num_parameters", "active_parameters"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise SnapshotError(f"{key} must be a positive integer or null")
    kind = raw.get("num_parameters_kind")
    if raw.get("num_parameters") is not None and kind not in PARAMETER_KINDS:
        raise SnapshotError(f"num_parameters_kind must be one of {', '.join(PARAMETER_KINDS)}")
    if raw.get("num_parameters") is not None:
        _text(raw, "num_parameters_source", required=True)
    pipeline_tag = raw.get("pipeline_tag", DEFAULT_PIPELINE_TAG)
    if not isinstance(pipeline_tag, str) or not 0 < len(pipeline_tag) <= 100:
        raise SnapshotError("pipeline_tag must be a short string")
    same = raw.get("same_architecture_as", [])
    if not isinstance(same, list) or not all(isinstance(i, str) and "/" in i for i in same):
        raise SnapshotError("same_architecture_as must be a list of repo ids")

    provenance = raw["provenance"]
    has_file, has_config = "config_file" in raw, "config" in raw
    if provenance not in PROVENANCES:
        raise SnapshotError(f"provenance must be one of {', '.join(PROVENANCES)}")
    if has_file == has_config:
        raise SnapshotError("give exactly one of config_file (a real config.json) or config (reconstructed)")
    if provenance in FILE_PROVENANCES:
        if not has_file:
            raise SnapshotError(f"a reconstructed config dict cannot be marked {provenance}; "
                                f"{provenance} entries name a config_file")
        repo, path, commit = (_text(raw, key, required=True) for key in ("source_repo", "source_path",
                                                                             "source_commit"))
        if not _REPO.match(repo):
            raise SnapshotError(f"source_repo {repo[:80]!r} is not owner/name")
        if not _COMMIT.match(commit):
            raise SnapshotError("source_commit must be a 40-hex commit")
        if path.startswith("/") or ".." in path.split("/"):
            raise SnapshotError("source_path must be a path inside the repository")
        source = f"https://github.com/{repo}/blob/{commit}/{path}"
        raw_text = _read_config_file(raw["config_file"], configs_dir)
    else:
        if not has_config:
            raise SnapshotError("config_file entries are real files: mark them verbatim or transcribed")
        if not isinstance(raw["config"], dict) or not raw["config"]:
            raise SnapshotError("config must be a non-empty JSON object")
        source = _text(raw, "source", required=True)
        _text(raw, "searched", required=True)  # where a verbatim copy was looked for, in vain
        raw_text = reconstructed_text(raw["config"])
    if len(source) > _MAX_SOURCE:
        raise SnapshotError(f"source longer than {_MAX_SOURCE} characters")
    optional = {key: _text(raw, key) for key in ("notes", "num_parameters_kind", "num_parameters_source",
                                                 "active_parameters_source", "copy", "hub_hash_check", "searched")}
    return SnapshotEntry(
        id=model_id,
        organisation=raw["organisation"].strip(),
        family=raw["family"].strip(),
        release_date=release,
        release_date_confidence=confidence,
        release_date_source=raw["release_date_source"].strip(),
        num_parameters=raw.get("num_parameters"),
        active_parameters=raw.get("active_parameters"),
        provenance=provenance,
        source=source,
        raw_text=raw_text,
        config_file=raw.get("config_file"),
        pipeline_tag=pipeline_tag,
        source_repo=raw.get("source_repo"),
        source_path=raw.get("source_path"),
        source_commit=raw.get("source_commit"),
        same_architecture_as=tuple(same),
        **optional,
    )


def _text(raw: dict, key: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SnapshotError(f"{key} must be a non-empty string")
    if len(value) > 2000:
        raise SnapshotError(f"{key} longer than 2000 characters")
    return value


def _release_date(value: object) -> date:
    if not isinstance(value, str) or len(value) != 10:
        raise SnapshotError("release_date must be YYYY-MM-DD")
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise SnapshotError(f"release_date {value!r} is not a real YYYY-MM-DD date") from None
    if day < EARLIEST_RELEASE:
        raise SnapshotError(f"release_date {value} is before {EARLIEST_RELEASE}: not an open language model release")
    return day


def _read_config_file(name: object, configs_dir: Path) -> str:
    # A bare file name: the manifest must not reach outside the bundled configs folder.
    if not isinstance(name, str) or not name.endswith(".json") or Path(name).name != name or name.startswith("."):
        raise SnapshotError(f"config_file must be a bare *.json file name, got {str(name)[:80]!r}")
    try:
        data = (configs_dir / name).read_bytes()
    except OSError:
        raise SnapshotError(f"config_file {name} not found in {configs_dir}") from None
    try:
        # Bytes decoded as-is: read_text() would fold CRLF line endings and the copy would no longer be verbatim.
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SnapshotError(f"config_file {name} is not UTF-8 text") from None


# --------------------------------------------------------------------------- loading


def load_snapshot(engine: Engine, path: Path | None = None, *, configs_dir: Path | None = None) -> dict:
    """Load the snapshot into a migrated store (the caller runs ``db.upgrade``); return a summary.

    One transaction: a bad manifest raises SnapshotError before anything is written.
    """
    entries = load_entries(path, configs_dir)
    with session_scope(engine) as session:
        return _load(session, entries)


def ensure_snapshot(engine: Engine, settings: Settings | None = None) -> dict | None:
    """On first run: load the snapshot when the store holds no models and autoload is on.

    Returns the load summary, or None when nothing was loaded. The emptiness check runs inside
    the write transaction (SQLite takes the write lock at BEGIN), so two processes starting
    together load it once.
    """
    settings = settings or get_settings()
    if not settings.autoload_snapshot or _model_count(engine) > 0:
        return None
    entries = load_entries()
    with session_scope(engine) as session:
        if session.exec(select(func.count()).select_from(HubModel)).one() > 0:
            return None
        return _load(session, entries)


def _model_count(engine: Engine) -> int:
    with read_session(engine) as session:
        return session.exec(select(func.count()).select_from(HubModel)).one()


def _load(session: Session, entries: list[SnapshotEntry]) -> dict:
    summary = {
        "entries": len(entries),
        "models_added": 0,
        "models_updated": 0,
        "models_unchanged": 0,
        "crawled_models_kept": 0,
        "revisions_added": 0,
        "revisions_skipped": 0,
        "parse_errors": 0,
        "errors": [],
    }
    for entry in entries:
        model = session.get(HubModel, entry.id)
        fields = entry.model_fields()
        if model is None:
            upsert_model(session, entry.id, **fields)
            summary["models_added"] += 1
        elif model.source == "snapshot":
            changed = {key: value for key, value in fields.items() if not _same(getattr(model, key), value)}
            if changed:
                upsert_model(session, entry.id, **changed)
                summary["models_updated"] += 1
            else:
                summary["models_unchanged"] += 1
        else:
            summary["crawled_models_kept"] += 1

        revision, created = _snapshot_revision(session, entry)
        if revision is None:
            summary["revisions_skipped"] += 1
            continue
        summary["revisions_added"] += created
        if revision.parse_status != "ok":
            summary["parse_errors"] += 1
            summary["errors"].append({"id": entry.id, "error": revision.parse_error})
    return summary


def _snapshot_revision(session: Session, entry: SnapshotEntry) -> tuple[ConfigRevision | None, bool]:
    """Record (or find) the entry's revision and make it current, unless the Hub's data is there."""
    crawled = session.exec(
        select(ConfigRevision.id).where(
            ConfigRevision.model_id == entry.id, ConfigRevision.sha.not_like(_ANY_SNAPSHOT_SHA)
        )
    ).first()
    if crawled is not None:
        return None, False
    revision, created = record_config(
        session, entry.id, entry.raw_text, entry.sha, provenance=entry.provenance, source=entry.source
    )
    if not created:
        # An entry edited and then reverted: its older revision becomes current again.
        model = session.get(HubModel, entry.id)
        if model is not None and model.current_revision_id != revision.id:
            model.current_revision_id = revision.id
            model.updated_at = utcnow()
    return revision, created


def _same(current: object, wanted: object) -> bool:
    if isinstance(current, datetime) and isinstance(wanted, datetime):
        # SQLite hands datetimes back without an offset; every stored datetime is UTC.
        if current.tzinfo is None:
            current = current.replace(tzinfo=timezone.utc)
        return current == wanted
    return current == wanted
