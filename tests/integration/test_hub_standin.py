"""The stand-in Hub speaks what the unmodified huggingface_hub client expects (hub-api.md §5)."""

from __future__ import annotations

import httpx
import pytest
from crawler_support import LLAMA
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    BadRequestError,
    GatedRepoError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from observatory.testing.hub_standin import git_blob_sha, populate


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.url, token=False)


def test_listing_pages_newest_first_with_absolute_links_and_expand(hub, api):
    ids = populate(hub, 23)
    listed = list(api.list_models(sort="created_at", expand=["createdAt", "sha", "siblings"]))
    assert [m.id for m in listed] == ids[::-1]
    assert hub.counts["listing"] == 3  # pages of 10
    assert listed[0].sha == hub.repos[ids[-1]].sha and listed[0].downloads is None  # only what was expanded
    assert [s.rfilename for s in listed[0].siblings] == [".gitattributes", "config.json"]
    link = httpx.get(f"{hub.url}/api/models", params={"sort": "createdAt"}).headers["Link"]
    assert link.startswith(f"<{hub.url}/api/models?") and link.endswith('>; rel="next"')
    with pytest.raises(BadRequestError):
        list(api.list_models(expand=["createdAt", "nonsense"]))


def test_hf_hub_download_head_and_get(hub, api, tmp_path):
    repo = hub.add_repo("org/model", LLAMA)
    path = hf_hub_download("org/model", "config.json", revision=repo.sha, endpoint=hub.url, token=False,
                           cache_dir=tmp_path)
    assert open(path, "rb").read() == repo.files["config.json"]
    head = httpx.head(f"{hub.url}/org/model/resolve/main/config.json")
    assert int(head.headers["Content-Length"]) == len(repo.files["config.json"])  # true size on HEAD
    assert head.headers["ETag"] == f'"{git_blob_sha(repo.files["config.json"])}"'
    assert head.headers["X-Repo-Commit"] == repo.sha
    assert api.model_info("org/model").sha == repo.sha
    assert hub.counts["resolve_head"] >= 1 and hub.counts["resolve_get"] == 1 and hub.counts["model_info"] == 1


def test_errors_carry_the_codes_the_client_maps(hub, api, tmp_path):
    hub.add_repo("org/model", LLAMA)
    hub.add_repo("org/gated", LLAMA, gated="auto")

    def download(repo_id, filename="config.json", revision=None):
        return hf_hub_download(repo_id, filename, revision=revision, endpoint=hub.url, token=False,
                               cache_dir=tmp_path)

    with pytest.raises(RepositoryNotFoundError):
        download("org/missing")
    with pytest.raises(RemoteEntryNotFoundError):
        download("org/model", "model.safetensors")
    with pytest.raises(RevisionNotFoundError):
        download("org/model", revision="f" * 40)
    with pytest.raises(GatedRepoError):
        download("org/gated")
    forbidden = httpx.get(f"{hub.url}/org/gated/resolve/main/config.json", headers={"Authorization": "Bearer x"})
    assert forbidden.status_code == 403 and forbidden.headers["X-Error-Code"] == "GatedRepo"


def test_hub_faithful_redirect_and_ratelimit_headers(tmp_path):
    from observatory.testing.hub_standin import HubStandin

    with HubStandin(redirect_resolve=True, quota={"resolvers": 2}, window_s=60) as hub:
        repo = hub.add_repo("org/model", LLAMA)
        first = httpx.get(f"{hub.url}/org/model/resolve/{repo.sha}/config.json")
        assert first.status_code == 307 and first.headers["Location"].startswith("/api/resolve-cache/models/org/model/")
        assert first.headers["RateLimit"].startswith('"resolvers";r=1;t=')
        final = httpx.get(f"{hub.url}{first.headers['Location']}")
        assert final.status_code == 200 and final.content == repo.files["config.json"]
        limited = httpx.get(f"{hub.url}/org/model/resolve/main/config.json")
        assert limited.status_code == 429 and '"resolvers";r=0;' in limited.headers["RateLimit"]
        assert hub.counts["rate_limited"] == 1


def test_any_config_body_leaves_the_listing_working(hub, api, engine, hub_settings):
    """A config nested deeper than Python's JSON parser goes (RecursionError) used to break every
    listing page that showed it; the Hub shows such a file's config as {}."""
    from observatory.crawler.run import crawl

    hub.add_repo("odd/deep", b"[" * 100_000 + b"]" * 100_000)
    hub.add_repo("odd/latin1", b'{"model_type": "caf\xe9"}')
    hub.add_repo("org/fine", LLAMA)

    listed = {m.id: m for m in api.list_models(expand=["createdAt", "config", "sha"])}
    assert listed["odd/deep"].config == {} and listed["odd/latin1"].config == {}
    assert listed["org/fine"].config == {"architectures": LLAMA["architectures"], "model_type": "llama"}
    assert httpx.get(f"{hub.url}/api/models", params={"config": "true"}).status_code == 200

    run = crawl(engine, hub_settings.model_copy(update={"crawl_first_run_days": 1}))
    assert run.status == "ok" and run.new == 1 and run.failures_by_reason == {"not_json": 2}
