"""Ask transformers what a config caches: build the model on torch's meta device (shapes only, no
weights), run a few tokens through it with transformers' own cache, and record the K/V shape of
every cache-layer update. Nothing here knows our parser; ``compare`` sets the two side by side.

The only module of the observatory that imports transformers. It runs in the oracle's child
process (``child``) and in the tests; never with remote code, never fetching: the config is handed
over as a dict and built from transformers' own config class.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import transformers
from transformers import AutoModel, DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from observatory.oracle.compare import NO_CACHE_TYPES
from observatory.oracle.meta_kernels import prefer_compiled
from observatory.oracle.reading import LayerCache, Reading

TOKENS = 3  # fewer than any sliding window or chunk, so every cached layer shows its full shape
SOURCE_TOKENS = 5  # encoder-decoder: length of the (meta) encoder output the decoder attends to
# SDPA's mask shortcut reads mask values (.item()), which meta tensors do not have; eager attention
# builds the same cache and never looks at values.
ATTENTION = "eager"
DTYPE = torch.bfloat16  # some MoE kernels (grouped_mm) accept only bf16, even on meta
VERSION = transformers.__version__


class RecordingCache(DynamicCache):
    """transformers' DynamicCache, noting the shape of every K/V it is handed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.updates: dict[int, LayerCache] = {}

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        # [batch, heads, tokens, head_dim]; the first update of a layer is the prompt
        self.updates.setdefault(layer_idx, LayerCache(key_states.shape[1], key_states.shape[-1],
                                                      value_states.shape[1], value_states.shape[-1],
                                                      k_is_v=key_states is value_states))
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)


def unbuildable(raw: dict) -> str | None:
    """Why transformers cannot build this config itself (remote code, unknown family), or None."""
    model_type = raw.get("model_type")
    if not isinstance(model_type, str):
        return "no model_type: transformers cannot tell which class to build"
    if model_type not in CONFIG_MAPPING:
        return (f"model_type {model_type!r} is not in transformers {transformers.__version__}:"
                " the model needs trust_remote_code")
    architectures = [a for a in raw.get("architectures") or [] if isinstance(a, str)]
    if architectures and not any(hasattr(transformers, a) for a in architectures):
        return (f"architecture {architectures[0]} is remote code (auto_map), not transformers' own"
                f" {model_type} class")
    return None


def probe(raw: dict) -> Reading:
    """The oracle's reading of ``raw`` (call ``unbuildable`` first): cache shapes and parameters,
    or, for families without attention or without a cache, what the config class says."""
    config = CONFIG_MAPPING[raw["model_type"]].from_dict(raw)
    text = config.get_text_config(decoder=True)
    if not hasattr(text, "num_attention_heads") and not hasattr(text, "num_key_value_heads"):
        return Reading(query_heads=None, parameters=base_model_parameters(raw), attention_free=True)
    if raw["model_type"] in NO_CACHE_TYPES:
        return Reading(query_heads=text.num_attention_heads, parameters=base_model_parameters(raw))
    return read(raw)


def read(raw: dict) -> Reading:
    """Build the language model of ``raw`` on the meta device and record its cache updates."""
    prefer_compiled()  # the same shapes at a fifth of the CPU (meta_kernels)
    config = CONFIG_MAPPING[raw["model_type"]].from_dict(raw)
    if config.is_encoder_decoder:
        return _read_encoder_decoder(config)
    text = config.get_text_config(decoder=True)
    with torch.device("meta"):
        model = AutoModel.from_config(text, attn_implementation=ATTENTION, dtype=DTYPE)
    cache = RecordingCache(config=text)
    ids = torch.zeros((1, TOKENS), dtype=torch.long, device="meta")
    with torch.no_grad():
        model(input_ids=ids, cache=cache, use_cache=True)
    return Reading(query_heads=text.num_attention_heads, self_attention=cache.updates,
                   parameters=count_parameters(model))


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def base_model_parameters(raw: dict) -> int:
    """The base model's parameter count alone (families with no cache to record)."""
    config = CONFIG_MAPPING[raw["model_type"]].from_dict(raw)
    with torch.device("meta"):
        return count_parameters(AutoModel.from_config(config.get_text_config(decoder=True), dtype=DTYPE))


@dataclass
class EncoderOutput(BaseModelOutput):
    """A given encoder output; Moonshine's decoder also reads its (absent) attention mask."""

    attention_mask: torch.Tensor | None = None


def _read_encoder_decoder(config) -> Reading:
    with torch.device("meta"):
        model = AutoModel.from_config(config, attn_implementation=ATTENTION, dtype=DTYPE)
    # Dia keeps its widths in encoder_config / decoder_config: the encoder's is what the decoder reads.
    encoder = getattr(config, "encoder_config", None)
    width = (getattr(config, "d_model", None) or getattr(config, "hidden_size", None)
             or encoder.hidden_size)
    # The encoder's output is given, not computed: only its length and width matter to the decoder.
    encoder_outputs = EncoderOutput(
        last_hidden_state=torch.zeros((1, SOURCE_TOKENS, width), dtype=DTYPE, device="meta"))
    channels = getattr(getattr(config, "decoder_config", None), "num_channels", None)  # Dia: audio codebooks
    ids = torch.zeros((1, TOKENS, channels) if channels else (1, TOKENS), dtype=torch.long, device="meta")
    self_cache, cross_cache = RecordingCache(config=config), RecordingCache(config=config)
    with torch.no_grad():
        model(encoder_outputs=encoder_outputs, decoder_input_ids=ids,
              cache=EncoderDecoderCache(self_cache, cross_cache), use_cache=True)
    # BART-style configs name the decoder's heads (Moonshine: decoder_num_attention_heads); T5's
    # num_attention_heads is both stacks'.
    decoder = getattr(config, "decoder_config", None)
    heads = (getattr(config, "decoder_attention_heads", None) or getattr(config, "decoder_num_attention_heads", None)
             or getattr(config, "num_attention_heads", None) or decoder.num_attention_heads)
    return Reading(query_heads=heads, self_attention=self_cache.updates, cross_attention=cross_cache.updates,
                   parameters=count_parameters(model))
