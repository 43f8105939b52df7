"""Generate ``observatory/core/family_defaults.py``: what transformers' own classes say about each family
the parameter estimator knows, so that core/ (pure, no transformers) reads a family's defaults instead of
guessing them.

    python -m observatory.oracle.family_defaults           # rewrite the table from the installed transformers
    python -m observatory.oracle.family_defaults --check   # exit 1 if the committed table differs

Per ``model_type``:
- ``tied``: the (text) config class's default ``tie_word_embeddings``;
- ``gated``: whether the MLP of the first layer has a gate, read from the model transformers builds from
  the class's default config on the meta device (its projections out of the model width carry twice the
  width of the one back): the modeling file decides gating, not a config key. ``None`` where the first layer holds no dense MLP or
  the default config cannot be built.
``tests/oracle/test_family_defaults.py`` checks the committed table against transformers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "observatory" / "core" / "family_defaults.py"
MLP_NAMES = ("mlp", "feed_forward", "ffn", "mlp_block", "feedforward")


def families() -> list[str]:
    from observatory.core.params import FAMILIES
    return sorted(FAMILIES)


def text_config(model_type: str):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        return None
    config = CONFIG_MAPPING[model_type]()
    return config.get_text_config(decoder=True)


def gated(config) -> bool | None:
    """Whether the first layer's dense MLP has a gate: its projections out of the model width carry twice
    the width its projection back into it reads (gate and up, or one fused gate-up), not once."""
    import torch
    from transformers import AutoModel

    hidden = getattr(config, "hidden_size", None)
    if not isinstance(hidden, int):
        return None
    try:
        with torch.device("meta"):
            model = AutoModel.from_config(config)
    except Exception:  # noqa: BLE001 - a default config transformers cannot build has no reading
        return None
    for name, module in model.named_modules():
        parts = name.split(".")
        if len(parts) >= 2 and parts[-1] in MLP_NAMES and parts[-2] == "0":
            linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
            into = sum(m.out_features for m in linears if m.in_features == hidden and m.out_features != hidden)
            back = [m.in_features for m in linears if m.out_features == hidden and m.in_features != hidden]
            if len(back) != 1 or not into:
                return None  # experts, a router, or a width equal to the model's: no reading
            if into == 2 * back[0]:
                return True
            return False if into == back[0] else None
    return None


def table() -> dict[str, dict]:
    out = {}
    for model_type in families():
        config = text_config(model_type)
        if config is None:
            continue
        tied = getattr(config, "tie_word_embeddings", None)
        out[model_type] = {"tied": tied if isinstance(tied, bool) else None, "gated": gated(config)}
    return out


# The keys of a vision_config the tower estimate reads (observatory/core/params.py, _vision_tower).
VISION_KEYS = ("hidden_size", "embed_dim", "num_hidden_layers", "depth", "intermediate_size", "num_attention_heads",
               "num_heads", "num_key_value_heads", "patch_size", "spatial_patch_size", "temporal_patch_size",
               "num_channels", "in_channels", "image_size", "spatial_merge_size", "out_hidden_size", "hidden_act")
CONFIG_DIR = ROOT / "observatory" / "catalog" / "data" / "configs"


def vision_table() -> dict[str, dict]:
    """Per wrapper model_type with a vision_config in the bundled configs (and per tower model_type with
    a class of its own): the vision config class's defaults for the keys the tower estimate reads, which
    a checkpoint's config may leave out."""
    import json

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    wrappers, towers = set(), set()
    for path in CONFIG_DIR.glob("*.json"):
        raw = json.loads(path.read_text())
        vision = raw.get("vision_config")
        if isinstance(vision, dict) and raw.get("model_type") in CONFIG_MAPPING:
            wrappers.add(raw["model_type"])
        if isinstance(vision, dict) and vision.get("model_type") in CONFIG_MAPPING:
            towers.add(vision["model_type"])  # a tower class of its own (Pixtral's, Idefics3's) under AutoConfig
    classes = {}
    for wrapper in sorted(wrappers):
        cls = getattr(CONFIG_MAPPING[wrapper], "sub_configs", {}).get("vision_config")
        if isinstance(cls, type) and cls.__name__ != "AutoConfig":
            classes[wrapper] = cls
    for tower in sorted(towers - set(classes)):
        classes[tower] = CONFIG_MAPPING[tower]
    out = {}
    for key, cls in sorted(classes.items()):
        config = cls()
        values = {k: getattr(config, k) for k in VISION_KEYS if isinstance(getattr(config, k, None), (int, str))
                  and not isinstance(getattr(config, k), bool)}
        values["model_type"] = config.model_type
        out[key] = values
    return out


def render(rows: dict[str, dict]) -> str:
    import transformers

    lines = [f'"""Family defaults read from transformers {transformers.__version__}\'s own classes (generated by',
             "observatory/oracle/family_defaults.py; do not edit): per model_type, the config class's default",
             "tie_word_embeddings and whether the first layer's MLP is gated in the model it builds (None: no",
             'dense MLP there, or the default cannot be built)."""', "",
             f'TRANSFORMERS_VERSION = "{transformers.__version__}"', "",
             "FAMILY_DEFAULTS: dict[str, dict[str, bool | None]] = {"]
    for model_type, row in sorted(rows.items()):
        lines.append(f'    "{model_type}": {{"tied": {row["tied"]}, "gated": {row["gated"]}}},')
    lines.append("}")
    lines += ["", "# Per wrapper (or tower) model_type: its vision config class's defaults for the keys the tower estimate reads.",
              "VISION_DEFAULTS: dict[str, dict[str, int | str]] = {"]
    for wrapper, values in vision_table().items():
        lines.append(f'    "{wrapper}": {values!r},')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed table differs")
    args = ap.parse_args()
    text = render(table())
    if args.check:
        same = TABLE.exists() and TABLE.read_text() == text
        print("family defaults: up to date" if same else f"family defaults: {TABLE.name} differs; regenerate")
        return 0 if same else 1
    TABLE.write_text(text)
    print(f"wrote {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
