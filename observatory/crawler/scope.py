"""Crawl scopes: which listed models count (pure).

The default scope is language models: a repo with a ``config.json`` whose pipeline tag is one
of the text-generating tasks (the Hub infers the tag from the architecture when the card has
none). Encoders, diffusion, speech recognition, GGUF-only and adapter-only repos are skipped
without a request. ``author`` and ``hub_filter`` are sent to the Hub (fewer listing pages);
the rest is applied to each listed entry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from observatory.hub.listing import Listed

LM_PIPELINE_TAGS = (
    "text-generation",
    "text2text-generation",
    "image-text-to-text",
    "audio-text-to-text",
    "video-text-to-text",
    "visual-question-answering",
    "any-to-any",
)


@dataclass(frozen=True)
class Scope:
    name: str = "default"
    pipeline_tags: tuple[str, ...] = LM_PIPELINE_TAGS  # empty: any (or none)
    libraries: tuple[str, ...] = ()  # empty: any
    min_downloads: int = 0  # as listed when seen; new repos start near 0
    require_config: bool = True  # skip repos whose file list has no config.json
    author: str | None = None  # sent to the Hub
    hub_filter: tuple[str, ...] = ()  # Hub tags, sent to the Hub (e.g. "transformers")

    def definition(self) -> dict:
        """The filters, as stored with the scope's marks (the name is the key, not part of it)."""
        data = asdict(self)
        data.pop("name")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    def skip_reason(self, listed: Listed) -> str | None:
        """Why this entry is out of scope, or None if it should be stored."""
        if self.require_config and listed.has_config is False:
            return "no_config_file"
        if self.pipeline_tags and listed.pipeline_tag not in self.pipeline_tags:
            return "out_of_scope"
        if self.libraries and listed.library_name not in self.libraries:
            return "out_of_scope"
        # An unknown count (the listing gave none, or nonsense) does not show the threshold is met.
        if self.min_downloads > 0 and (listed.downloads is None or listed.downloads < self.min_downloads):
            return "out_of_scope"
        return None


PRESETS: dict[str, Scope] = {
    "default": Scope(),
    # Every repo with a config.json, whatever its task: for a broader census.
    "all": Scope(name="all", pipeline_tags=()),
}


def build_scope(name: str = "default", *, pipeline_tags: tuple[str, ...] | None = None,
                any_pipeline: bool = False, libraries: tuple[str, ...] | None = None,
                min_downloads: int | None = None, author: str | None = None,
                hub_filter: tuple[str, ...] | None = None) -> Scope:
    """A preset (or the default filters under a new name) with the given options applied."""
    scope = replace(PRESETS.get(name, Scope()), name=name)
    changes: dict = {}
    if any_pipeline:
        changes["pipeline_tags"] = ()
    elif pipeline_tags:
        changes["pipeline_tags"] = tuple(pipeline_tags)
    if libraries:
        changes["libraries"] = tuple(libraries)
    if min_downloads is not None:
        changes["min_downloads"] = min_downloads
    if author:
        changes["author"] = author
    if hub_filter:
        changes["hub_filter"] = tuple(hub_filter)
    return replace(scope, **changes)


class ScopeMismatch(ValueError):
    """A scope name reused with different filters: its marks would no longer mean anything."""


def check_definition(scope: Scope, stored: dict | None) -> None:
    if stored and stored != scope.definition():
        differing = sorted(k for k in set(stored) | set(scope.definition())
                           if stored.get(k) != scope.definition().get(k))
        raise ScopeMismatch(
            f"scope {scope.name!r} was first crawled with other filters ({', '.join(differing)} differ); "
            "use another --scope name for these filters"
        )

