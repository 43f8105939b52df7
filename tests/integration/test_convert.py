"""``observatory convert`` on tiny checkpoints that transformers builds in the test (random init, a few
hundred KB, saved as safetensors): exact round trip at K = H, pooled attention equal to a hand
computation, K = 1 and K = H/2 load and generate, and refusals that leave nothing behind."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

transformers = pytest.importorskip("transformers")

from observatory.convert.checkpoint import INDEX_NAME, convert_checkpoint
from observatory.core.kv_conversion import ConversionRefused

H, D, HIDDEN, LAYERS = 8, 8, 64, 2
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),  # biases on q/k/v: pooled with the weights
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": D}),  # per-head q/k norms: kept
}


def tiny(family: str, path, kv_heads: int = H, dtype=torch.float32, seed: int = 0):
    config_cls, model_cls, extra = FAMILIES[family]
    config = getattr(transformers, config_cls)(
        vocab_size=96, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=LAYERS,
        num_attention_heads=H, num_key_value_heads=kv_heads, max_position_embeddings=128,
        tie_word_embeddings=False, attn_implementation="eager", **extra)
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).to(dtype).eval()
    model.save_pretrained(path, max_shard_size="100KB")  # several shards and an index
    return model


def load(family: str, path):
    return getattr(transformers, FAMILIES[family][1]).from_pretrained(path, attn_implementation="eager").eval()


def tensors(path) -> dict[str, torch.Tensor]:
    out = {}
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(file, framework="pt") as f:
            out.update({name: f.get_tensor(name) for name in f.keys()})  # noqa: SIM118
    return out


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_converting_to_k_equal_h_gives_back_the_same_tensors(tmp_path, family):
    tiny(family, tmp_path / "src")
    assert (tmp_path / "src" / INDEX_NAME).is_file()
    report = convert_checkpoint(tmp_path / "src", tmp_path / "dst", H, "mean", max_shard_bytes=100_000)
    before, after = tensors(tmp_path / "src"), tensors(tmp_path / "dst")
    assert report.shards > 1 and (tmp_path / "dst" / INDEX_NAME).is_file()
    assert sorted(before) == sorted(after)
    for name in before:
        assert torch.equal(before[name], after[name]), name
    assert json.loads((tmp_path / "dst" / "config.json").read_text())["num_key_value_heads"] == H


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_pooled_attention_equals_the_hand_computation(tmp_path, family):
    source = tiny(family, tmp_path / "src")
    convert_checkpoint(tmp_path / "src", tmp_path / "dst", 2, "mean")
    converted = load(family, tmp_path / "dst")
    attn, old = converted.model.layers[0].self_attn, source.model.layers[0].self_attn
    torch.manual_seed(1)
    x = torch.randn(1, 5, HIDDEN)
    positions = torch.arange(5)[None]
    cos, sin = converted.model.rotary_emb(x, positions)
    mask = torch.full((5, 5), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        ours, _ = attn(x, position_embeddings=(cos, sin), attention_mask=mask)
        # By hand, from the source's weights: each group of four heads' K and V rows averaged.
        def pooled(linear):
            w = linear.weight.reshape(2, H // 2, D, HIDDEN).mean(1).reshape(2 * D, HIDDEN)
            b = linear.bias.reshape(2, H // 2, D).mean(1).reshape(2 * D) if linear.bias is not None else 0
            return x @ w.T + b
        q = old.q_proj(x).reshape(1, 5, H, D).transpose(1, 2)
        k = pooled(old.k_proj).reshape(1, 5, 2, D).transpose(1, 2)
        v = pooled(old.v_proj).reshape(1, 5, 2, D).transpose(1, 2)
        if hasattr(old, "q_norm"):
            q, k = old.q_norm(q), old.k_norm(k)

        def rope(t):
            half = torch.cat((-t[..., D // 2:], t[..., : D // 2]), dim=-1)
            return t * cos[:, None] + half * sin[:, None]
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(H // 2, dim=1), v.repeat_interleave(H // 2, dim=1)  # head h uses KV h // 4
        weights = torch.softmax(q @ k.transpose(-1, -2) / D ** 0.5 + mask, dim=-1)
        hand = old.o_proj((weights @ v).transpose(1, 2).reshape(1, 5, H * D))
    assert torch.allclose(ours, hand, atol=1e-5), (ours - hand).abs().max()


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("kv_heads", [1, H // 2])
@pytest.mark.parametrize("method", ["mean", "first", "random"])
def test_a_converted_model_loads_and_generates(tmp_path, family, kv_heads, method):
    tiny(family, tmp_path / "src", dtype=torch.bfloat16)
    report = convert_checkpoint(tmp_path / "src", tmp_path / "dst", kv_heads, method)
    assert (report.from_kv_heads, report.to_kv_heads, report.pooled) == (H, kv_heads, 2 * LAYERS * (2 if family == "qwen2" else 1))
    model = load(family, tmp_path / "dst")
    assert model.config.num_key_value_heads == kv_heads
    assert model.model.layers[0].self_attn.k_proj.weight.shape == (kv_heads * D, HIDDEN)
    assert model.dtype == torch.bfloat16
    out = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4, do_sample=False)
    assert out.shape == (1, 7)


def test_files_that_are_not_weights_come_along(tmp_path):
    tiny("llama", tmp_path / "src")
    (tmp_path / "src" / "tokenizer.json").write_text('{"model": "stand-in"}')
    convert_checkpoint(tmp_path / "src", tmp_path / "dst", 4)
    assert (tmp_path / "dst" / "tokenizer.json").read_text() == '{"model": "stand-in"}'
    assert (tmp_path / "dst" / "generation_config.json").is_file()
    config = json.loads((tmp_path / "dst" / "config.json").read_text())
    assert config["observatory_conversion"] == {"method": "mean", "from_kv_heads": H, "to_kv_heads": 4,
                                                "recipe": "GQA (Ainslie et al. 2023, arXiv 2305.13245) section 2.1"}


def test_first_keeps_each_groups_first_head_and_random_is_seeded(tmp_path):
    tiny("llama", tmp_path / "src")
    src = tensors(tmp_path / "src")
    convert_checkpoint(tmp_path / "src", tmp_path / "first", 2, "first")
    first = tensors(tmp_path / "first")
    name = "model.layers.1.self_attn.v_proj.weight"
    assert torch.equal(first[name], src[name].reshape(2, 4, D, HIDDEN)[:, 0].reshape(2 * D, HIDDEN))
    convert_checkpoint(tmp_path / "src", tmp_path / "r1", 2, "random", seed=3)
    convert_checkpoint(tmp_path / "src", tmp_path / "r2", 2, "random", seed=3)
    r1, r2 = tensors(tmp_path / "r1"), tensors(tmp_path / "r2")
    assert torch.equal(r1[name], r2[name])
    assert not torch.equal(r1[name], first[name])
    # Every tensor that is not a K/V projection is copied as it was.
    assert torch.equal(r1["model.layers.1.self_attn.q_proj.weight"], src["model.layers.1.self_attn.q_proj.weight"])


def test_a_gqa_checkpoint_converts_further_to_mqa(tmp_path):
    source = tiny("mistral", tmp_path / "src", kv_heads=4)
    convert_checkpoint(tmp_path / "src", tmp_path / "dst", 1, "mean")
    out = tensors(tmp_path / "dst")
    w = source.model.layers[0].self_attn.k_proj.weight.detach()
    assert torch.allclose(out["model.layers.0.self_attn.k_proj.weight"], w.reshape(1, 4, D, HIDDEN).mean(1).reshape(D, HIDDEN))


def _edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(("change", "message"), [
    ({"auto_map": {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}}, "remote-code"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 4}}, "quantized"),
    ({"kv_lora_rank": 512, "qk_rope_head_dim": 64}, "latent"),
    ({"model_type": "phi3"}, "model_type 'phi3'"),
])
def test_refuses_what_it_cannot_convert_honestly(tmp_path, change, message):
    tiny("llama", tmp_path / "src")
    _edit_config(tmp_path / "src", **change)
    with pytest.raises(ConversionRefused, match=message):
        convert_checkpoint(tmp_path / "src", tmp_path / "dst", 2)
    assert not (tmp_path / "dst").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no half-written temporary folder either


@pytest.mark.parametrize(("source_kv", "kv_heads", "message"), [
    (H, 3, "does not divide H = 8"), (H, 16, "does not divide H = 8"), (H, 0, "positive integer"),
    (2, 4, "cannot be made from the checkpoint's 2 KV heads"),
])
def test_refuses_a_k_that_does_not_group_evenly(tmp_path, source_kv, kv_heads, message):
    tiny("llama", tmp_path / "src", kv_heads=source_kv)
    with pytest.raises(ConversionRefused, match=message):
        convert_checkpoint(tmp_path / "src", tmp_path / "dst", kv_heads)


def _write_single(tmp_path, config: dict, weights: dict[str, torch.Tensor]):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(config))
    save_file(weights, src / "model.safetensors")
    return src


def test_refuses_fused_qkv_and_integer_weights(tmp_path):
    config = {"model_type": "llama", "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 16,
              "num_hidden_layers": 1}
    src = _write_single(tmp_path, config, {"model.layers.0.self_attn.qkv_proj.weight": torch.zeros(48, 16)})
    with pytest.raises(ConversionRefused, match="fused QKV"):
        convert_checkpoint(src, tmp_path / "dst", 2)
    (src / "model.safetensors").unlink()
    save_file({"model.layers.0.self_attn.k_proj.weight": torch.zeros(16, 16, dtype=torch.int8),
               "model.layers.0.self_attn.v_proj.weight": torch.zeros(16, 16, dtype=torch.int8)},
              src / "model.safetensors")
    with pytest.raises(ConversionRefused, match="stored as I8"):
        convert_checkpoint(src, tmp_path / "dst", 2)


def test_refuses_an_existing_destination_and_pickled_weights(tmp_path):
    tiny("llama", tmp_path / "src")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "keep.txt").write_text("mine")
    with pytest.raises(ConversionRefused, match="not empty"):
        convert_checkpoint(tmp_path / "src", tmp_path / "dst", 2)
    assert (tmp_path / "dst" / "keep.txt").read_text() == "mine"
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((tmp_path / "src" / "config.json").read_text())
    torch.save({}, pickled / "pytorch_model.bin")
    with pytest.raises(ConversionRefused, match="safetensors"):
        convert_checkpoint(pickled, tmp_path / "out", 2)


def test_the_command_converts_and_refuses_in_one_line(tmp_path):
    from click.testing import CliRunner

    from observatory.cli import main

    tiny("qwen2", tmp_path / "src")
    result = CliRunner().invoke(main, ["convert", str(tmp_path / "src"), str(tmp_path / "dst"), "--kv-heads", "2",
                                       "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["to_kv_heads"] == 2
    assert load("qwen2", tmp_path / "dst").config.num_key_value_heads == 2
    result = CliRunner().invoke(main, ["convert", str(tmp_path / "src"), str(tmp_path / "odd"), "--kv-heads", "3"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [("Error: cannot convert: K = 3 does not divide H = 8: query heads "
                                                  "would not group evenly")]
