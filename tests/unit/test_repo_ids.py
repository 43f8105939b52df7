import pytest

from observatory.core.repo_ids import InvalidRepoId, is_valid_repo_id, validate_repo_id


@pytest.mark.parametrize("good", ["gpt2", "meta-llama/Llama-2-70b-hf", "Qwen/Qwen2.5-7B-Instruct", "a/b", "org_x/m.v1_0"])
def test_valid(good):
    assert validate_repo_id(good) == good


@pytest.mark.parametrize(
    "bad",
    ["", "/", "a/b/c", "../etc/passwd", "a/..", "<script>alert(1)</script>", "org/na me", "-org/x", "org/x-",
     "a--b/c", "x" * 200, "org/\u00e9", "org/x\n", None, 3],
)
def test_invalid(bad):
    assert not is_valid_repo_id(bad)
    with pytest.raises(InvalidRepoId):
        validate_repo_id(bad)
