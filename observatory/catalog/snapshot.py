"""The bundled snapshot: notable open models 2018-2026, so a fresh install has real data offline.

``data/snapshot.json`` lists each model with its organisation, family, release date (with its
source and a confidence), parameter count (with its kind and source) and its config:

- ``verbatim``: a real config.json in ``data/configs/`` (``config_file``), copied byte for byte
  from a public repository (``source_repo``, ``source_path``, ``source_commit``). ``source_sha256``
  is the sha256 of the file at that commit, recorded once from the source when the file was taken;
  loading refuses a verbatim entry whose bytes no longer have it. ``copy`` says what those bytes
  are beside the Hub's own file (the Hub file, an earlier revision, an edit the vendor made).
- ``transcribed``: a config rebuilt from something that shows it rather than copied as a file:
  code that embeds it as a Python dict, the text of the repo's Hub pages, or a vendored copy we
  corrected by a newline. ``source_sha256`` is still the cited file's; the values are the
  publisher's, and the bytes are the Hub's only where the Hub check says so.
- ``reconstructed``: the published geometry written as a minimal config dict (``config``),
  only where no copy could be found anywhere public (``searched`` says where we looked).

``hub_sha256`` and ``hub_revision``, where a public list of the Hub's own hashes covers the repo
(``HUB_HASH_LIST``), give the Hub's config.json at that revision; ``SnapshotEntry.hub_check``
compares the bundled bytes with it ("match" or "differs"; None where the list has no entry).

``release_date_kind`` says what the release date is the date of (``RELEASE_DATE_KINDS``).

Lineage follows the crawler's rules (``core.lineage.classify``): ``base_models`` is written as
the Hub listing writes ``baseModels`` (a relation and the base repos), so a checkpoint one
organisation publishes of another's weights (an NVFP4 or FP8 conversion, a transformers-format
twin) is a derivative of its base, as a crawl would record it. ``quantization_from_copy`` marks
a config taken from a quantized copy of an original repo: its quantization block is the copy's.
Entries whose config is byte-identical to another's name it in ``same_architecture_as``. All go
through the crawler's write path (``ingest.record_configs``), so one parser derives every geometry.

``fixtures`` lists the other files in ``data/configs/``: configs bundled for the parser's tests
(encoder-decoders, encoder-only models, an abridged file), not models of the dataset, each with
the same source fields. ``configs/MANIFEST.tsv`` is generated from this file
(``observatory snapshot manifest``), never edited by hand.

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
from sqlmodel import Session, col, select

from observatory.core.lineage import Lineage, classify
from observatory.core.repo_ids import InvalidRepoId, validate_repo_id
from observatory.settings import Settings, get_settings
from observatory.store.db import batches, read_session, session_scope
from observatory.store.ingest import (
    ConfigItem,
    record_configs,
    update_model_rows,
    upsert_models,
)
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
# Where a parameter count comes from: the Hub's safetensors metadata, an index file's total_size
# over bytes per parameter, the weight files' sizes over bytes per parameter, the publisher's
# model card, paper or announcement, the nominal size in the repo's name, a third party's
# figure; "config estimate" leaves the count to core.params.
PARAMETER_KINDS = ("safetensors total", "index file", "weights file size", "model card", "paper", "announcement",
                   "model name", "third-party report", "config estimate")
# What a release date is the date of.
RELEASE_DATE_KINDS = ("announcement", "paper", "repository commit", "hub upload", "third-party report", "unsourced")
HUB_HASH_LIST = ("dinoml/model-configs-rs", "corpus/report-repositories.json", "23d004779fcb00691b14e563df7b5bbeba7b472b")
DEFAULT_PIPELINE_TAG = "text-generation"
EARLIEST_RELEASE = date(2017, 1, 1)

_REQUIRED = ("id", "organisation", "family", "release_date", "release_date_confidence", "release_date_source",
             "release_date_kind", "provenance")
_OPTIONAL = ("num_parameters", "num_parameters_kind", "num_parameters_source", "active_parameters",
             "active_parameters_source", "config", "config_file", "source_repo", "source_path", "source_commit",
             "source_sha256", "source", "copy", "hub_sha256", "hub_revision", "same_architecture_as", "searched",
             "notes", "pipeline_tag", "base_models", "quantization_from_copy")
_MAX_SOURCE = 500  # ConfigRevision.source
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
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
    release_date_kind: str = "unsourced"
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
    source_sha256: str | None = None
    copy: str | None = None
    hub_sha256: str | None = None
    hub_revision: str | None = None
    same_architecture_as: tuple[str, ...] = ()
    searched: str | None = None
    base_models: dict | None = None  # as the Hub listing writes baseModels: {"relation": ..., "models": [{"id": ...}]}
    quantization_from_copy: bool = False

    META_FIELDS = ("family", "release_date_source", "release_date_kind", "num_parameters_kind", "num_parameters_source",
                   "active_parameters_source", "source_repo", "source_path", "source_commit", "source_sha256", "copy",
                   "sha256", "hub_sha256", "hub_revision", "hub_check", "same_architecture_as", "searched", "notes")

    @property
    def sha(self) -> str:
        return SHA_PREFIX + hashlib.sha1(self.raw_text.encode("utf-8")).hexdigest()

    @property
    def sha256(self) -> str | None:
        """sha256 of the bundled file's bytes (None for a reconstructed entry, which has no file)."""
        return hashlib.sha256(self.raw_text.encode("utf-8")).hexdigest() if self.config_file else None

    @property
    def hub_check(self) -> str | None:
        """"match" when the bundled bytes are the Hub's config.json at ``hub_revision``, "differs"
        when they are not, None when no published Hub hash covers the repo."""
        if self.hub_sha256 is None or self.sha256 is None:
            return None
        return "match" if self.sha256 == self.hub_sha256 else "differs"

    @property
    def created_at(self) -> datetime:
        return datetime(self.release_date.year, self.release_date.month, self.release_date.day, tzinfo=timezone.utc)

    def lineage(self) -> Lineage:
        """Relation, bases and quantization by the crawler's rules, from the entry's ``base_models``
        and its config (whose quantization block is ignored when it is the copy's)."""
        try:
            config = json.loads(self.raw_text)
        except ValueError:
            config = None
        declared = (None, None) if self.quantization_from_copy else None
        return classify(self.id, self.base_models, config, self.num_parameters, declared=declared)

    def model_fields(self) -> dict:
        """The HubModel fields a snapshot row carries (Hub-only fields stay at their defaults)."""
        tags = ["snapshot"]
        model_type = _top_level_model_type(self.raw_text)
        if model_type:
            tags.append(model_type)
        lineage = self.lineage()
        return {
            "created_at": self.created_at,
            "pipeline_tag": self.pipeline_tag,
            "library_name": "transformers",
            "tags": tags,
            "num_parameters": self.num_parameters,
            "parameters_source": (None if self.num_parameters is None else
                                  "safetensors" if self.num_parameters_kind == "safetensors total" else "published"),
            "active_parameters": self.active_parameters,
            "relation": lineage.relation,
            "base_models": list(lineage.base_models) or None,
            "is_test_repo": lineage.is_test_repo,
            "lineage_warnings": list(lineage.warnings) or None,
            "organisation": self.organisation,
            "snapshot_meta": {name: _plain(getattr(self, name)) for name in self.META_FIELDS},
            "source": "snapshot",
            "release_date_confidence": self.release_date_confidence,
        }


@dataclass(frozen=True)
class SnapshotFixture:
    """A config bundled beside the snapshot for the parser's tests, with where it was taken from."""

    file: str
    model_id: str
    source_repo: str
    source_path: str
    source_commit: str
    source_sha256: str
    copy: str
    raw_text: str
    notes: str | None = None


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


def _read_document(path: Path) -> dict:
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
    if not isinstance(doc.get("fixtures", []), list):
        raise SnapshotError(f"snapshot {path}: 'fixtures' must be a list")
    return doc


def _paths(path: Path | None, configs_dir: Path | None) -> tuple[Path, Path]:
    path = Path(path) if path is not None else SNAPSHOT_PATH
    configs_dir = Path(configs_dir) if configs_dir is not None else (
        CONFIGS_DIR if path == SNAPSHOT_PATH else path.parent / "configs"
    )
    return path, configs_dir


def _parse_all(items: list, parse, path: Path, key: str, what: str) -> list:
    """Parse every item, collecting every problem into one SnapshotError (nothing half-loaded)."""
    parsed, problems, seen = [], [], set()
    for index, raw in enumerate(items):
        label = f"{what}[{index}]"
        if isinstance(raw, dict) and isinstance(raw.get(key), str):
            label += f" ({raw[key][:80]})"
        try:
            item = parse(raw)
        except SnapshotError as exc:
            problems.append(f"{label}: {exc}")
            continue
        name = getattr(item, key)
        if name in seen:
            problems.append(f"{label}: duplicate {key}")
            continue
        seen.add(name)
        parsed.append(item)
    if problems:
        shown = "; ".join(problems[:5])
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        noun = "entry" if len(problems) == 1 else "entries"
        raise SnapshotError(f"snapshot {path}: {len(problems)} bad {noun}: {shown}{more}")
    return parsed


def load_entries(path: Path | None = None, configs_dir: Path | None = None) -> list[SnapshotEntry]:
    """Read and validate a snapshot manifest; raise SnapshotError naming every problem found."""
    path, configs_dir = _paths(path, configs_dir)
    doc = _read_document(path)
    return _parse_all(doc["models"], lambda raw: _entry(raw, configs_dir), path, "id", "models")


def load_fixtures(path: Path | None = None, configs_dir: Path | None = None) -> list[SnapshotFixture]:
    """The parser-test configs bundled beside the snapshot (``fixtures``), each checked like a copy."""
    path, configs_dir = _paths(path, configs_dir)
    doc = _read_document(path)
    return _parse_all(doc.get("fixtures", []), lambda raw: _fixture(raw, configs_dir), path, "file", "fixtures")


_FIXTURE_KEYS = ("file", "model_id", "source_repo", "source_path", "source_commit", "source_sha256", "copy")


def _keys(raw: object, what: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
    """The object, once it has every required key and no unknown one."""
    if not isinstance(raw, dict):
        raise SnapshotError(f"{what} must be a JSON object")
    missing = [key for key in required if key not in raw]
    if missing:
        raise SnapshotError(f"missing {', '.join(missing)}")
    unknown = sorted(set(raw) - set(required) - set(optional))
    if unknown:
        raise SnapshotError(f"unknown key(s) {', '.join(unknown)}")
    return raw


def _fixture(raw: object, configs_dir: Path) -> SnapshotFixture:
    raw = _keys(raw, "fixture", _FIXTURE_KEYS, ("notes",))
    repo, path, commit = _copy_source(raw)
    text = _read_config_file(raw["file"], configs_dir)
    _check_bytes(text, raw["source_sha256"], raw["file"])
    return SnapshotFixture(file=raw["file"], model_id=_text(raw, "model_id", required=True), source_repo=repo,
                           source_path=path, source_commit=commit, source_sha256=raw["source_sha256"],
                           copy=_text(raw, "copy", required=True), raw_text=text, notes=_text(raw, "notes"))


def _copy_source(raw: dict) -> tuple[str, str, str]:
    """``source_repo``, ``source_path``, ``source_commit`` of a copied file, each checked."""
    repo, path, commit = (_text(raw, key, required=True) for key in ("source_repo", "source_path", "source_commit"))
    if not _REPO.match(repo):
        raise SnapshotError(f"source_repo {repo[:80]!r} is not owner/name")
    if not _COMMIT.match(commit):
        raise SnapshotError("source_commit must be a 40-hex commit")
    if path.startswith("/") or ".." in path.split("/"):
        raise SnapshotError("source_path must be a path inside the repository")
    if not isinstance(raw.get("source_sha256"), str) or not _SHA256.match(raw["source_sha256"]):
        raise SnapshotError("source_sha256 must be the 64-hex sha256 of the cited file, recorded from the source")
    return repo, path, commit


def _check_bytes(text: str, source_sha256: str, name: str) -> None:
    """A verbatim copy's bytes must still be the cited file's: an edit fails loudly, here."""
    got = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if got != source_sha256:
        raise SnapshotError(f"config_file {name} has sha256 {got[:12]}..., not the source's {source_sha256[:12]}...; "
                            "a verbatim copy must keep the cited file's bytes")


def _entry(raw: object, configs_dir: Path) -> SnapshotEntry:
    raw = _keys(raw, "entry", _REQUIRED, _OPTIONAL)
    try:
        model_id = validate_repo_id(raw["id"])
    except InvalidRepoId as exc:
        raise SnapshotError(str(exc)) from None
    release = _release_date(raw["release_date"])
    confidence = raw["release_date_confidence"]
    if confidence not in CONFIDENCES:
        raise SnapshotError(f"release_date_confidence must be one of {', '.join(CONFIDENCES)}")
    if raw["release_date_kind"] not in RELEASE_DATE_KINDS:
        raise SnapshotError(f"release_date_kind must be one of {', '.join(RELEASE_DATE_KINDS)}")
    if (raw["release_date_kind"] == "unsourced") != str(raw["release_date_source"]).startswith("unsourced"):
        raise SnapshotError("release_date_kind is unsourced exactly when release_date_source says 'unsourced: ...'")
    for key in ("family", "organisation", "release_date_source"):
        _text(raw, key, required=True)
    for key in ("num_parameters", "active_parameters"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise SnapshotError(f"{key} must be a positive integer or null")
    kind = raw.get("num_parameters_kind")
    if kind not in PARAMETER_KINDS:
        raise SnapshotError(f"num_parameters_kind must be one of {', '.join(PARAMETER_KINDS)}")
    if (raw.get("num_parameters") is None) != (kind == "config estimate"):
        raise SnapshotError("num_parameters_kind is 'config estimate' exactly when num_parameters is null")
    if raw.get("num_parameters") is not None:
        _text(raw, "num_parameters_source", required=True)
    pipeline_tag = raw.get("pipeline_tag", DEFAULT_PIPELINE_TAG)
    if not isinstance(pipeline_tag, str) or not 0 < len(pipeline_tag) <= 100:
        raise SnapshotError("pipeline_tag must be a short string")
    same = raw.get("same_architecture_as", [])
    if not isinstance(same, list) or not all(isinstance(i, str) and "/" in i for i in same):
        raise SnapshotError("same_architecture_as must be a list of repo ids")
    base_models = raw.get("base_models")
    if base_models is not None and not (isinstance(base_models, dict) and isinstance(base_models.get("models"), list)):
        raise SnapshotError('base_models must be written as the Hub writes baseModels: '
                            '{"relation": ..., "models": [{"id": ...}]}')
    if not isinstance(raw.get("quantization_from_copy", False), bool):
        raise SnapshotError("quantization_from_copy must be true or false")
    hub_sha256, hub_revision = raw.get("hub_sha256"), raw.get("hub_revision")
    if (hub_sha256 is None) != (hub_revision is None):
        raise SnapshotError("hub_sha256 and hub_revision go together")
    if hub_sha256 is not None and not (isinstance(hub_sha256, str) and _SHA256.match(hub_sha256)
                                       and isinstance(hub_revision, str) and _COMMIT.match(hub_revision)):
        raise SnapshotError("hub_sha256 must be 64-hex and hub_revision a 40-hex commit")

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
        repo, path, commit = _copy_source(raw)
        source = f"https://github.com/{repo}/blob/{commit}/{path}"
        raw_text = _read_config_file(raw["config_file"], configs_dir)
        if provenance == "verbatim":
            _check_bytes(raw_text, raw["source_sha256"], raw["config_file"])
    else:
        if not has_config:
            raise SnapshotError("config_file entries are real files: mark them verbatim or transcribed")
        if not isinstance(raw["config"], dict) or not raw["config"]:
            raise SnapshotError("config must be a non-empty JSON object")
        if "source_sha256" in raw:
            raise SnapshotError("a reconstructed entry copies no file: it has no source_sha256")
        source = _text(raw, "source", required=True)
        _text(raw, "searched", required=True)  # where a verbatim copy was looked for, in vain
        raw_text = reconstructed_text(raw["config"])
    if len(source) > _MAX_SOURCE:
        raise SnapshotError(f"source longer than {_MAX_SOURCE} characters")
    optional = {key: _text(raw, key) for key in ("notes", "num_parameters_kind", "num_parameters_source",
                                                 "active_parameters_source", "copy", "searched")}
    return SnapshotEntry(
        id=model_id,
        organisation=raw["organisation"].strip(),
        family=raw["family"].strip(),
        release_date=release,
        release_date_confidence=confidence,
        release_date_source=raw["release_date_source"].strip(),
        release_date_kind=raw["release_date_kind"],
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
        source_sha256=raw.get("source_sha256"),
        hub_sha256=hub_sha256,
        hub_revision=hub_revision,
        same_architecture_as=tuple(same),
        base_models=base_models,
        quantization_from_copy=raw.get("quantization_from_copy", False),
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
    if not settings.autoload_snapshot or has_models(engine):
        return None
    entries = load_entries()
    with session_scope(engine) as session:
        if session.exec(select(func.count()).select_from(HubModel)).one() > 0:
            return None
        return _load(session, entries)


def has_models(engine: Engine) -> bool:
    """The store holds a model (one row read, not a count of a million)."""
    with read_session(engine) as session:
        return session.exec(select(HubModel.id).limit(1)).first() is not None


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
    # A few statements per batch of entries rather than a dozen per entry: on the first run the
    # whole snapshot goes into an empty store before the site answers.
    for batch in batches(entries):
        _load_batch(session, batch, summary)
    return summary


def _load_batch(session: Session, entries: list[SnapshotEntry], summary: dict) -> None:
    ids = [entry.id for entry in entries]
    models = {model.id: model for model in session.exec(select(HubModel).where(col(HubModel.id).in_(ids)))}
    # Models whose config a crawl fetched: the Hub's data has the last word, the snapshot adds nothing.
    crawled = set(session.exec(select(ConfigRevision.model_id).where(
        col(ConfigRevision.model_id).in_(ids), ConfigRevision.sha.not_like(_ANY_SNAPSHOT_SHA))))
    writes: dict[str, dict] = {}
    for entry in entries:
        model, fields = models.get(entry.id), entry.model_fields()
        if model is None:
            writes[entry.id] = fields
            summary["models_added"] += 1
        elif model.source == "snapshot":
            changed = {key: value for key, value in fields.items() if not _same(getattr(model, key), value)}
            if changed:
                writes[entry.id] = changed
                summary["models_updated"] += 1
            else:
                summary["models_unchanged"] += 1
        else:
            summary["crawled_models_kept"] += 1
    if writes:
        upsert_models(session, writes)

    recording = [entry for entry in entries if entry.id not in crawled]
    summary["revisions_skipped"] += len(entries) - len(recording)
    recorded = record_configs(session, [ConfigItem(entry.id, entry.raw_text, entry.sha, entry.provenance, entry.source)
                                        for entry in recording])
    # An entry edited and then reverted: its older revision becomes current again. (A revision
    # already stored means its model was stored before this load, so it is among ``models``.)
    now = utcnow()
    update_model_rows(session, {
        entry.id: {"current_revision_id": done.revision_id, "updated_at": now}
        for entry, done in zip(recording, recorded, strict=True)
        if not done.created and models[entry.id].current_revision_id != done.revision_id})
    # Recording a config stores the quantization it declares; a block copied from a quantized
    # mirror is not this repo's, so the entry's lineage has the last word.
    lineages = {entry.id: entry.lineage() for entry in entries
                if entry.id not in models or models[entry.id].source == "snapshot"}
    update_model_rows(session, {model_id: {"quant_method": lineage.quant_method, "quant_bits": lineage.quant_bits}
                                for model_id, lineage in lineages.items()})
    for entry, done in zip(recording, recorded, strict=True):
        summary["revisions_added"] += done.created
        if done.parse_status != "ok":
            summary["parse_errors"] += 1
            summary["errors"].append({"id": entry.id, "error": done.parse_error})


def _same(current: object, wanted: object) -> bool:
    if isinstance(current, datetime) and isinstance(wanted, datetime):
        # SQLite hands datetimes back without an offset; every stored datetime is UTC.
        if current.tzinfo is None:
            current = current.replace(tzinfo=timezone.utc)
        return current == wanted
    return current == wanted
