"""Hub repository ids are untrusted input: validate before they reach URLs, files or pages."""

from __future__ import annotations

import re

# The Hub allows letters, digits, "-", "_", "." in each part, no leading/trailing "-"/"."
# and no "--" or "..", at most 96 characters per part; an optional "org/" prefix.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9_.\-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"^(?:{_PART}/)?{_PART}$")


class InvalidRepoId(ValueError):
    pass


def validate_repo_id(value: object) -> str:
    """Return ``value`` if it is a well-formed Hub repo id, else raise InvalidRepoId."""
    if not isinstance(value, str):
        raise InvalidRepoId(f"repo id must be a string, got {type(value).__name__}")
    if not _REPO_ID.fullmatch(value) or "--" in value or ".." in value:
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise InvalidRepoId(f"not a valid Hub repo id: {shown!r}")
    return value


def is_valid_repo_id(value: object) -> bool:
    try:
        validate_repo_id(value)
    except InvalidRepoId:
        return False
    return True
