"""The family defaults core/ reads (observatory/core/family_defaults.py) are what transformers' own classes
say: the config class's default tie_word_embeddings, and whether the model it builds gates its MLP."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from observatory.core import family_defaults
from observatory.core.params import DIFFERS_FROM_TRANSFORMERS, FAMILIES, family

transformers = pytest.importorskip("transformers", reason="the oracle needs transformers (pinned in the test extra)")
ROOT = Path(__file__).resolve().parents[2]


def generator():
    spec = importlib.util.spec_from_file_location("family_defaults_tool", ROOT / "observatory" / "oracle" / "family_defaults.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_committed_table_is_what_transformers_says():
    assert family_defaults.TRANSFORMERS_VERSION == transformers.__version__
    tool = generator()
    assert family_defaults.FAMILY_DEFAULTS == tool.table()
    assert (ROOT / "observatory" / "core" / "family_defaults.py").read_text() == tool.render(tool.table())


def test_the_table_reads_known_families():
    table = family_defaults.FAMILY_DEFAULTS
    assert table["gpt_neox"] == {"tied": False, "gated": False}  # fc1/fc2 MLP, untied head
    assert table["gemma3_text"] == {"tied": True, "gated": True}
    assert table["lfm2"]["gated"] is True  # its declared width is shrunk; the gate is still there
    assert table["modernbert"]["gated"] is True  # one fused Wi of twice the width


@pytest.mark.parametrize("entry", sorted(DIFFERS_FROM_TRANSFORMERS))
def test_every_listed_difference_is_one(entry):
    name, attribute = entry
    theirs = family_defaults.FAMILY_DEFAULTS[name][attribute]
    assert theirs is not None and getattr(FAMILIES[name], attribute) != theirs
    assert getattr(family(name), attribute) == getattr(FAMILIES[name], attribute)


def test_the_estimator_follows_the_table_elsewhere():
    for name, row in family_defaults.FAMILY_DEFAULTS.items():
        for attribute, theirs in row.items():
            if theirs is not None and (name, attribute) not in DIFFERS_FROM_TRANSFORMERS:
                assert getattr(family(name), attribute) == theirs, (name, attribute)
