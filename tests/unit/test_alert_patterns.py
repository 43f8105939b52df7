"""The subscription patterns mean the same in every regex engine that meets them.

The API publishes them in its OpenAPI schema; pydantic checks them with Rust's regex, the
e-mail sender with Python's ``re``, and schema-driven clients generate from them with ECMA
semantics. "\\s" differs in all three (U+0085 and \\x1c-\\x1f), which once let schemathesis
generate an address that pydantic refused; the patterns now spell their sets out.
"""

import functools
import re

import pytest
from pydantic import TypeAdapter, ValidationError, constr

from observatory.alerts.email import (
    ADDRESS_PATTERN,
    SPACE_OR_CONTROL,
    VISIBLE_CHAR,
    EmailError,
    validate_address,
)

BMP = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]


@functools.cache
def _adapter(pattern: str) -> TypeAdapter:
    return TypeAdapter(constr(pattern=pattern))


def _pydantic_accepts(pattern: str, text: str) -> bool:
    try:
        _adapter(pattern).validate_python(text)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("pattern", [VISIBLE_CHAR, ADDRESS_PATTERN])
def test_no_engine_dependent_class_escapes(pattern):
    assert not re.search(r"\\[sSwWdDbB]", pattern)


def test_python_and_pydantic_agree_on_every_bmp_character():
    python = re.compile(VISIBLE_CHAR)
    disagree = [hex(ord(ch)) for ch in BMP if _pydantic_accepts(VISIBLE_CHAR, ch) != bool(python.search(ch))]
    assert disagree == []


def test_what_strip_removes_is_never_a_visible_character():
    """``create`` strips the name, so a name the pattern accepts is never blank after it."""
    assert [hex(ord(ch)) for ch in BMP if not ch.strip() and re.fullmatch(VISIBLE_CHAR, ch)] == []
    assert re.fullmatch(f"[{SPACE_OR_CONTROL}]", "\u0085")


@pytest.mark.parametrize("local", ["k\u0085X", "a\x1cb", "a\u00a0b", "a\u2028b", "a\ufeffb", "a\u0080b"])
def test_addresses_with_space_or_control_characters_are_refused_by_both(local):
    address = f"{local}@example.com"
    assert not _pydantic_accepts(ADDRESS_PATTERN, address)
    with pytest.raises(EmailError):
        validate_address(address)


@pytest.mark.parametrize("address", ["ana@example.com", "jörg.o+alerts@lab.example.org", "x@a-b.co"])
def test_plain_addresses_are_accepted_by_both(address):
    assert _pydantic_accepts(ADDRESS_PATTERN, address)
    assert validate_address(address) == address
