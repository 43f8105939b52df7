"""Where a Hub repository comes from: its relation to a base model, its quantization, whether it is
a test or toy repo, and a fingerprint of its architecture. Pure: plain values in, plain values out.

Most repositories that ship a ``config.json`` are derivatives (fine-tunes, quantizations, adapters,
merges) or tiny test models that copy a base's geometry. ``classify`` reads the listing's
``baseModels`` value, the config and the parameter count:

- ``relation`` comes from ``baseModels.relation``; with no ``baseModels`` it is ``original``, unless
  the repo is a conversion of someone's weights: its name carries a conversion tag (``-FP8``,
  ``-NVFP4``, ``-GPTQ``, ``-AWQ``, ``-GGUF``, ``-4bit``, ...; ``CONVERSION_TAG``) or its config declares
  a ``quantization_config`` (or MLX's ``quantization``) in a method labs do not release in. Labs
  do release in FP8, MXFP4, compressed-tensors INT4 and BitNet (DeepSeek-V3, gpt-oss, Kimi K2.5,
  BitNet b1.58), so a config in those with no base and no conversion tag stays ``original``, with
  a note. The bundled snapshot goes through the same rules, so a checkpoint one organisation
  publishes of another's weights is a derivative of its base there as in a crawl, and the same
  weights count once among the originals.
- malformed input (wrong types, missing keys, an unknown relation) gives ``relation = None``
  (unknown) and a warning, never an exception; a base id that is not a valid repo id is dropped
  with a warning.
- a test or toy repo: a known testing organisation, a ``tiny-random`` style name, or fewer than
  ``TOY_PARAMETERS`` parameters.

``parse_safetensors`` reads the listing's ``safetensors`` value the way huggingface_hub does (both
``parameters`` and ``total`` required). ``geometry_fingerprint`` groups identical architectures.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from observatory.core.config_dialects import get_path, select_section, show
from observatory.core.geometry import Geometry
from observatory.core.params import EXPERT_COUNT_KEYS, FFN_KEYS, VOCAB_KEYS
from observatory.core.repo_ids import is_valid_repo_id

__all__ = ["RELATIONS", "TOY_PARAMETERS", "Lineage", "classify", "conversion_tag", "fingerprint_fields",
           "geometry_fingerprint", "is_test_repo", "parse_safetensors", "quantization"]

RELATIONS = ("original", "finetune", "quantized", "adapter", "merge")
DERIVED = frozenset(RELATIONS[1:])

# No language model anyone tracks is this small; tiny-random test repos hold 0.1-5M parameters and
# toy models (TinyStories-1M) a few million.
TOY_PARAMETERS = 10_000_000
MAX_PARAMETERS = 10**14  # a parameter count above this is a corrupt value, not a model
MAX_BASES = 64  # merges list a handful; more is not a base list we should store

TEST_ORGS = frozenset({"hf-internal-testing", "trl-internal-testing", "optimum-internal-testing",
                       "peft-internal-testing", "hf-tiny-model-private", "hf-testing", "huggingface-testing"})
TEST_NAME = re.compile(r"(^|[-_.])(tiny[-_]?random|random[-_]?tiny|tiny[-_]?dummy|dummy[-_]?tiny)([-_.]|$)",
                       re.IGNORECASE)

# Formats labs train or release in: with no declared base such a config is an original release.
NATIVE_LOW_PRECISION = frozenset({"fp8", "mxfp4", "compressed-tensors", "bitnet"})
# A tag in a repo's name that advertises a conversion of weights published elsewhere.
CONVERSION_TAG = re.compile(
    r"(^|[-_.])(nv-?fp4|mxfp4|fp8([-_](dynamic|static|block))?|fp4|int[348]|w\d+a\d+|gptq|awq|gguf|exl2|mlx|"
    r"bnb|\d+-?bits?|quantized)([-_.]|$)", re.IGNORECASE)
# Bits implied by the method when the config does not spell them out.
METHOD_BITS = {"fp8": 8, "mxfp4": 4, "eetq": 8, "fbgemm_fp8": 8, "nvfp4": 4}


@dataclass(frozen=True)
class Lineage:
    relation: str | None  # one of RELATIONS, or None when the listing's value is unusable
    base_models: tuple[str, ...] = ()
    quant_method: str | None = None  # None: no quantization declared; "unknown": declared, method unreadable
    quant_bits: int | None = None  # None when not declared or not stated
    is_test_repo: bool = False
    warnings: tuple[str, ...] = ()

    @property
    def is_original(self) -> bool:
        return self.relation == "original"

    def to_dict(self) -> dict[str, Any]:
        return {"relation": self.relation, "base_models": list(self.base_models), "quant_method": self.quant_method,
                "quant_bits": self.quant_bits, "is_test_repo": self.is_test_repo, "warnings": list(self.warnings)}


def classify(model_id: Any, base_models_field: Any, config: Any, num_parameters: Any, *,
             declared: tuple[str | None, int | None] | None = None) -> Lineage:
    """Relation, bases, quantization and test-repo flag of one listed model (see the module docstring).

    ``declared`` is the (method, bits) already read from the model's config (``quantization``),
    for callers that hold that rather than the config itself.
    """
    warnings: list[str] = []
    if not is_valid_repo_id(model_id):
        warnings.append(f"model id {show(model_id)} is not a valid repo id")
    method, bits = declared if declared is not None else quantization(config, warnings)
    relation, bases = _relation(model_id, base_models_field, warnings)
    if relation == "original" and method is not None and method not in NATIVE_LOW_PRECISION:
        relation = "quantized"  # a method labs do not release in: someone's quantization
    elif relation == "original" and conversion_tag(model_id):
        relation = "quantized"
        warnings.append(f"no declared base, but the name carries the conversion tag {conversion_tag(model_id)!r}:"
                        " a converted copy of weights published elsewhere")
    elif relation == "original" and method is not None:
        warnings.append(f"quantization_config {method} with no declared base: taken as a native low-precision release")
    params = _parameter_count(num_parameters, warnings)
    return Lineage(relation=relation, base_models=bases, quant_method=method, quant_bits=bits,
                   is_test_repo=is_test_repo(model_id, params), warnings=tuple(warnings))


def conversion_tag(model_id: Any) -> str | None:
    """The conversion tag in a repo's name (``"NVFP4"`` in ``nvidia/DeepSeek-V4-Flash-NVFP4``), or None."""
    if not isinstance(model_id, str):
        return None
    found = CONVERSION_TAG.search(model_id.rpartition("/")[2])
    return found.group(2) if found else None


def _relation(model_id: Any, value: Any, warnings: list[str]) -> tuple[str | None, tuple[str, ...]]:
    if value is None:
        return "original", ()
    if not isinstance(value, dict):
        warnings.append(f"baseModels is {type(value).__name__} {show(value)}, expected an object; relation unknown")
        return None, ()
    relation = value.get("relation")
    if not isinstance(relation, str):
        warnings.append(f"baseModels.relation is {show(relation)}, expected a string; relation unknown")
        return None, ()
    if relation not in DERIVED:
        warnings.append(f"baseModels.relation {show(relation)} is not one of {', '.join(sorted(DERIVED))};"
                        " relation unknown")
        return None, ()
    models = value.get("models")
    if not isinstance(models, list):
        warnings.append(f"baseModels.models is {show(models)}, expected a list; relation unknown")
        return None, ()
    bases: list[str] = []
    for i, entry in enumerate(models[:MAX_BASES]):
        base = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or "id" not in entry:
            warnings.append(f"baseModels.models[{i}] {show(entry)} has no id; dropped")
        elif not is_valid_repo_id(base):
            warnings.append(f"baseModels.models[{i}].id {show(base)} is not a valid repo id; dropped")
        elif base == model_id:
            warnings.append(f"baseModels.models[{i}] names the model itself; dropped")
        elif base not in bases:
            bases.append(base)
    if len(models) > MAX_BASES:
        warnings.append(f"baseModels lists {len(models)} models; kept the first {MAX_BASES}")
    if not bases:
        warnings.append(f"baseModels.relation is {relation} but no valid base model is listed")
    return relation, tuple(bases)


def quantization(config: Any, warnings: list[str]) -> tuple[str | None, int | None]:
    """(method, bits) from ``quantization_config`` (transformers) or ``quantization`` (MLX); bits None
    when the config does not say. A config that is not an object declares nothing."""
    if not isinstance(config, dict):
        return None, None
    sections = [config] + [s for s in (get_path(config, p) for p in ("text_config", "llm_config")) if
                           isinstance(s, dict)]
    for section in sections:
        qc = section.get("quantization_config")
        if qc is not None:
            return _transformers_quantization(qc, warnings)
        mlx = section.get("quantization")
        if isinstance(mlx, dict) and "bits" in mlx:  # mlx-lm writes {"group_size": 64, "bits": 4}
            return "mlx", _bits(mlx.get("bits"), "quantization.bits", warnings)
    return None, None


def _transformers_quantization(qc: Any, warnings: list[str]) -> tuple[str | None, int | None]:
    if not isinstance(qc, dict):
        warnings.append(f"quantization_config is {show(qc)}, expected an object; quantization unknown")
        return "unknown", None
    method = qc.get("quant_method")
    if not isinstance(method, str) or not method.strip():
        warnings.append(f"quantization_config.quant_method is {show(method)}; quantization method unknown")
        method = "unknown"
    method = method.strip().lower()[:40]
    if qc.get("bits") is not None:
        return method, _bits(qc["bits"], "quantization_config.bits", warnings)
    for key in ("weight_bits", "nbits", "w_bit", "wbits"):
        if qc.get(key) is not None:
            return method, _bits(qc[key], f"quantization_config.{key}", warnings)
    if qc.get("load_in_4bit") is True:  # bitsandbytes
        return method, 4
    if qc.get("load_in_8bit") is True:
        return method, 8
    groups = qc.get("config_groups")  # compressed-tensors: {"group_0": {"weights": {"num_bits": 8}}}
    if isinstance(groups, dict):
        for name, group in groups.items():
            bits = get_path(group, "weights.num_bits") if isinstance(group, dict) else None
            if bits is not None:
                return method, _bits(bits, f"quantization_config.config_groups.{name}.weights.num_bits", warnings)
    algo = qc.get("quant_algo")  # NVIDIA ModelOpt: "FP8", "NVFP4", "W4A16_AWQ"
    if isinstance(algo, str):
        digits = re.search(r"(\d+)", algo)
        return method, METHOD_BITS.get(algo.lower()) or (int(digits.group(1)) if digits else None)
    return method, METHOD_BITS.get(method)


def _bits(value: Any, path: str, warnings: list[str]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 32:
        return value
    warnings.append(f"{path} is {show(value)}, expected a whole number of bits from 1 to 32; bits unknown")
    return None


def _parameter_count(value: Any, warnings: list[str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_PARAMETERS:
        return value
    warnings.append(f"num_parameters {show(value)} is not a positive whole number; ignored")
    return None


def is_test_repo(model_id: Any, num_parameters: int | None) -> bool:
    """A testing organisation, a tiny-random style name, or a toy parameter count."""
    if num_parameters is not None and num_parameters < TOY_PARAMETERS:
        return True
    if not isinstance(model_id, str):
        return False
    org, _, name = model_id.rpartition("/")
    return org.lower() in TEST_ORGS or org.lower().endswith("-internal-testing") or bool(TEST_NAME.search(name))


def parse_safetensors(value: Any, warnings: list[str] | None = None) -> tuple[int, dict[str, int]] | None:
    """``(total, {dtype: count})`` from the listing's ``safetensors`` value, or None.

    None with no warning when the value is absent; None with a warning (appended to ``warnings``)
    when it is malformed: not an object, ``parameters`` or ``total`` missing (huggingface_hub
    requires both), counts that are not positive whole numbers. A total that disagrees with the
    per-dtype sum is kept, with a warning: the Hub computes one from the other.
    """
    notes: list[str] = [] if warnings is None else warnings
    if value is None:
        return None
    if not isinstance(value, dict):
        notes.append(f"safetensors is {type(value).__name__} {show(value)}, expected an object; ignored")
        return None
    missing = [key for key in ("parameters", "total") if key not in value]
    if missing:
        notes.append(f"safetensors lacks {' and '.join(missing)}; ignored")
        return None
    total, parameters = value["total"], value["parameters"]
    if not _is_count(total) or total == 0:
        notes.append(f"safetensors.total is {show(total)}, expected a positive whole number; ignored")
        return None
    if not isinstance(parameters, dict):
        notes.append(f"safetensors.parameters is {show(parameters)}, expected an object; ignored")
        return None
    dtypes: dict[str, int] = {}
    for dtype, count in parameters.items():
        if not isinstance(dtype, str) or not dtype or len(dtype) > 20 or not _is_count(count):
            notes.append(f"safetensors.parameters has a bad entry {show({dtype: count})}; ignored")
            return None
        dtypes[dtype] = count
    if dtypes and sum(dtypes.values()) != total:
        notes.append(f"safetensors.total {total} differs from the sum of its dtypes {sum(dtypes.values())};"
                     " using the total")
    return total, dict(sorted(dtypes.items()))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_PARAMETERS


def fingerprint_fields(geometry: Geometry, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two architectures identical: the family and every shape a derivative copies."""
    sec = select_section(dict(cfg), [], {}) if isinstance(cfg, Mapping) else None
    data = sec.data if sec is not None else {}

    def raw(*keys: str) -> Any:
        for key in keys:
            value = data.get(key)
            if value is not None and isinstance(value, (int, str)) and not isinstance(value, bool):
                return value
        return None

    mla = geometry.mla
    return {
        "family": (geometry.model_type or "").lower(),
        "heads": geometry.num_query_heads,
        "kv_heads": geometry.num_kv_heads,
        "head_dim": geometry.head_dim,
        "v_head_dim": geometry.v_head_dim,
        "layers": geometry.num_layers,
        "hidden": geometry.hidden_size,
        "vocab": raw(*VOCAB_KEYS),
        "ffn": raw(*FFN_KEYS),
        "experts": raw(*EXPERT_COUNT_KEYS),
        "mla": [mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.v_head_dim, mla.q_lora_rank]
        if mla else None,
        "window": geometry.sliding_window,
        "schedule": _runs(geometry.layer_kinds),
        "kv_per_layer": list(geometry.kv_heads_per_layer) if geometry.kv_heads_per_layer else None,
    }


def geometry_fingerprint(geometry: Geometry, cfg: Mapping[str, Any]) -> str:
    """A short, stable id shared by every repo with the same architecture (``fingerprint_fields``)."""
    text = json.dumps(fingerprint_fields(geometry, cfg), sort_keys=True, separators=(",", ":"))
    return "g1-" + hashlib.sha256(text.encode()).hexdigest()[:20]


def _runs(kinds: tuple[str, ...]) -> str:
    """Run-length form of a layer schedule ("sliding*5,full*1,...") keeps the fields readable."""
    return ",".join(f"{kind}*{len(list(run))}" for kind, run in itertools.groupby(kinds))
