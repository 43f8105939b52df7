"""Capacity as deployed (``core.deployment``) against vLLM's and Megatron-LM's own rules, each
quoted from its source, and against hand-worked cases: Llama-3-70B (K = 8) at TP = 8 and 16, an
MQA model (StarCoder) at TP = 8, DeepSeek-V3 at TP = 8 under plain TP and data-parallel attention.

Where a quoted line is a Python expression it is evaluated as written, with the quoted names bound,
and compared with ours over a grid of head counts and TP degrees: a change in our arithmetic that
drifts from vLLM's fails here.
"""

from __future__ import annotations

import json

import pytest

from observatory.catalog.hardware import get_device
from observatory.catalog.snapshot import load_entries
from observatory.core import deployment as D
from observatory.core.geometry import parse_geometry
from observatory.core.params import estimate_parameters

# ---- the rules, as their sources state them ----------------------------------------------------


class Rule:
    def __init__(self, repo: str, path: str, commit: str, lines: tuple[str, ...], ours: str, choice: str):
        self.repo, self.path, self.commit, self.lines, self.ours, self.choice = repo, path, commit, lines, ours, choice


VLLM = "vllm-project/vllm"
RULES = {
    "kv_heads_per_rank": Rule(
        VLLM, "vllm/config/model.py", "0052a5b818980ce8a0477706aaf9f75bd5af72cd",
        ("def get_num_kv_heads(self, parallel_config: ParallelConfig) -> int:",
         "# If tensor parallelism is used, we divide the number of KV heads by",
         "# the tensor parallel size. We will replicate the KV heads in the",
         "# case where the number of KV heads is smaller than the tensor",
         "# parallel size so each GPU has at least one KV head.",
         "return max(1, total_num_kv_heads // parallel_config.tensor_parallel_size)"),
        "deployment.kv_heads_per_rank",
        "vLLM's choice: replicate rather than split the sequence (its decode context parallelism is opt-in)"),
    "replicas": Rule(
        VLLM, "vllm/model_executor/layers/linear.py", "0036d38de46c5d48fdedeb658dedc0fc0f95677d",
        ("if tp_size >= self.total_num_kv_heads:",
         "self.num_kv_heads = 1",
         "self.num_kv_head_replicas = divide(tp_size, self.total_num_kv_heads)",
         "else:",
         "self.num_kv_heads = divide(self.total_num_kv_heads, tp_size)",
         "self.num_kv_head_replicas = 1"),
        "deployment.kv_head_replicas", "follows from rule 1 (a law: a head is never split across ranks)"),
    "query_heads_divide": Rule(
        VLLM, "vllm/config/model.py", "0052a5b818980ce8a0477706aaf9f75bd5af72cd",
        ("if total_num_attention_heads % tensor_parallel_size != 0:",
         "raise ValueError(",
         "f\"Total number of attention heads ({total_num_attention_heads})\"",
         "\" must be divisible by tensor parallel size \""),
        "deployment.vllm_refusal", "vLLM's choice (padding heads would lift it)"),
    "kv_heads_divide": Rule(
        VLLM, "vllm/model_executor/models/llama.py", "0035bdf2b1ac243ef6f31eef27411b022461df8e",
        ("if self.total_num_kv_heads >= tp_size:",
         "# Number of KV heads is greater than TP size, so we partition",
         "assert self.total_num_kv_heads % tp_size == 0",
         "# Number of KV heads is less than TP size, so we replicate",
         "assert tp_size % self.total_num_kv_heads == 0"),
        "deployment.vllm_refusal", "vLLM's choice"),
    "divide": Rule(
        VLLM, "vllm/distributed/utils.py", "019969049a9d7c9188689fa8f4f8ebb9466a9271",
        ("def divide(numerator, denominator):",
         "ensure_divisibility(numerator, denominator)",
         "return numerator // denominator",
         "assert numerator % denominator == 0, \"{} is not divisible by {}\".format("),
        "deployment.vllm_refusal", "the assertion behind rules 2 and 3"),
    "mla_latent": Rule(
        VLLM, "vllm/config/model.py", "0052a5b818980ce8a0477706aaf9f75bd5af72cd",
        ("if self.use_mla:",
         "# When using MLA during decode it becomes MQA",
         "return 1",
         "return self.hf_text_config.kv_lora_rank + qk_rope_head_dim"),
        "deployment.layout (MLA: replicas = TP)",
        "a law of the latent under head-sharded TP: one head of kv_lora_rank + rope on every rank"),
    "dp_attention": Rule(
        VLLM, "docs/serving/data_parallel_deployment.md", "01e4fce07423dafcc832600ba05159fb28dc1126",
        ("For MoE models, particularly those like DeepSeek that employ MLA (Multi-head Latent Attention), it can be "
         "advantageous to use data parallel for the attention layers and expert or tensor parallel (EP or TP) for "
         "the expert layers.",
         "Each DP engine has an independent KV cache"),
        "deployment.layout (DP_ATTENTION: replicas = 1)", "a deployment choice vLLM and SGLang offer for MLA"),
    "megatron_query_groups": Rule(
        "NVIDIA/Megatron-LM", "megatron/core/transformer/attention.py", "00c2c0adeec16015f386548793c88ef08ff6acec",
        ("self.num_attention_heads_per_partition = divide(self.config.num_attention_heads, world_size)",
         "self.num_query_groups_per_partition = divide(self.config.num_query_groups, world_size)"),
        "deployment.megatron_divisible", "Megatron's choice: no replication, so TP must divide K"),
}


def test_every_rule_names_its_source():
    for name, rule in RULES.items():
        assert rule.repo.count("/") == 1 and rule.path and len(rule.commit) == 40, name
        assert all(line.strip() for line in rule.lines) and rule.choice, name
        module, _, attr = rule.ours.split(" ")[0].partition(".")
        assert module == "deployment" and hasattr(D, attr), (name, rule.ours)


GRID = [(k, tp) for k in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 40, 64, 128) for tp in (1, 2, 4, 8, 16, 32)]


def _vllm(expression: str, **names):
    """Evaluate one quoted vLLM expression with its names bound (``divide`` as vLLM defines it)."""
    def divide(numerator, denominator):
        assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
        return numerator // denominator

    class Parallel:
        tensor_parallel_size = names.pop("tp")

    return eval(expression, {"__builtins__": {"max": max}, "divide": divide},  # noqa: S307 - a quoted line
                {"parallel_config": Parallel, **names})


@pytest.mark.parametrize(("k", "tp"), GRID)
def test_kv_heads_per_rank_is_vllms_expression(k, tp):
    quoted = RULES["kv_heads_per_rank"].lines[-1].removeprefix("return ")
    assert D.kv_heads_per_rank(k, tp) == _vllm(quoted, total_num_kv_heads=k, tp=tp)


@pytest.mark.parametrize(("k", "tp"), GRID)
def test_replicas_and_refusals_follow_qkv_parallel_linear(k, tp):
    lines = RULES["replicas"].lines
    heads = 16 * k
    geom = parse_geometry({"model_type": "llama", "num_attention_heads": heads, "num_key_value_heads": k,
                           "head_dim": 128, "hidden_size": 4096, "num_hidden_layers": 2})
    try:
        if tp >= k:
            replicas = _vllm(lines[2].split(" = ", 1)[1].replace("self.", ""), tp_size=tp, total_num_kv_heads=k, tp=tp)
        else:
            _vllm(lines[4].split(" = ", 1)[1].replace("self.", ""), tp_size=tp, total_num_kv_heads=k, tp=tp)
            replicas = 1
    except AssertionError:
        replicas = None  # vLLM refuses to build the layer
    # vLLM's two checks that refuse a degree, evaluated as quoted: the query heads divide by TP ...
    query_check = RULES["query_heads_divide"].lines[0].removeprefix("if ").removesuffix(":")
    if _vllm(query_check, total_num_attention_heads=heads, tensor_parallel_size=tp, tp=tp):
        replicas = None
    # ... and the KV heads divide by TP or TP by them (the model's own asserts)
    shard, replicate = (line.removeprefix("assert ").replace("self.", "") for line in RULES["kv_heads_divide"].lines[2::2])
    if not _vllm(shard if k >= tp else replicate, total_num_kv_heads=k, tp_size=tp, tp=tp):
        assert replicas is None
    lay = D.layout(geom, tp)
    assert lay.replicas == replicas
    assert (lay.vllm_refusal is None) == (replicas is not None)
    if replicas is not None:
        assert D.kv_head_replicas(k, tp) == replicas
        assert lay.copies == pytest.approx(replicas)  # each head on `replicas` ranks: the cache that many times


def test_query_heads_that_do_not_divide_are_refused():
    falcon = parse_geometry({"model_type": "falcon", "num_attention_heads": 71, "hidden_size": 4544,
                             "num_hidden_layers": 32, "multi_query": True})
    assert D.vllm_refusal(falcon, 2) == "71 query heads do not divide by TP = 2"
    assert D.layout(falcon, 8).copies is None
    assert "vLLM refuses TP = 2, 4, 8 and 16" in D.replication_sentence(falcon)


@pytest.mark.parametrize(("k", "tp"), GRID)
def test_megatron_divides_the_query_groups(k, tp):
    geom = parse_geometry({"model_type": "llama", "num_attention_heads": 16 * k, "num_key_value_heads": k,
                           "head_dim": 128, "hidden_size": 4096, "num_hidden_layers": 2})
    quoted = RULES["megatron_query_groups"].lines[1].split(" = ", 1)[1]
    try:
        _vllm(quoted.replace("self.config.", "").replace("world_size", "tp_size"), num_query_groups=k, tp_size=tp,
              tp=tp)
        divisible = True
    except AssertionError:
        divisible = False
    assert D.megatron_divisible(geom, tp) is divisible


# ---- hand-worked cases -------------------------------------------------------------------------

SNAPSHOT = {e.id: e for e in load_entries()}


def _model(model_id: str):
    entry = SNAPSHOT[model_id]
    cfg = json.loads(entry.raw_text)
    return parse_geometry(cfg), entry.num_parameters, estimate_parameters(cfg).breakdown["attention"]


H100, H200 = get_device("h100-sxm"), get_device("h200-sxm")
CONTEXT = 32_768


def test_llama3_70b_at_tp8_shards_and_at_tp16_stores_twice():
    geom, params, _ = _model("meta-llama/Meta-Llama-3-70B")  # H = 64, K = 8, d = 128, 80 layers
    assert geom.kv_elements_per_token * 2 == 80 * 2 * 8 * 128 * 2 == 327_680  # bf16 bytes per token
    tp8, tp16 = D.layout(geom, 8), D.layout(geom, 16)
    assert (tp8.kv_heads_per_rank, tp8.replicas, tp8.copies, tp8.rank_bytes_per_token) == (1, 1, 1.0, 40_960)
    assert (tp16.kv_heads_per_rank, tp16.replicas, tp16.copies, tp16.rank_bytes_per_token) == (1, 2, 2.0, 40_960)
    assert tp8.megatron_divisible is True and tp16.megatron_divisible is False  # Megatron cannot run TP = 16
    assert D.replication_sentence(geom).startswith("From TP = 16 this model stores its KV twice")
    # 8 x H100 at 32k: (80 GB - 141.107 GB / 8) / (40,960 B x 32,768) = 62.36 GB / 1.342 GB = 46 sequences.
    at8 = D.group_capacity(geom, H100.memory_bytes, 8, CONTEXT, params=params)
    assert at8.weights_per_rank == 70_553_706_496 * 2 // 8 == 17_638_426_624 and at8.max_sequences == 46
    # Twice the GPUs, yet each still holds one whole head per sequence: 71.18 GB / 1.342 GB = 53, not 2 x 46.
    at16 = D.group_capacity(geom, H100.memory_bytes, 16, CONTEXT, params=params)
    assert at16.weights_per_rank == 8_819_213_312 and at16.max_sequences == 53


def test_an_mqa_model_at_tp8_stores_its_cache_eight_times():
    geom, params, _ = _model("bigcode/starcoder")  # H = 48, K = 1, d = 128, 40 layers
    lay = D.layout(geom, 8)
    assert (lay.kv_heads_per_rank, lay.replicas, lay.copies) == (1, 8, 8.0)
    assert lay.rank_bytes_per_token == geom.kv_elements_per_token * 2 == 40 * 2 * 128 * 2 == 20_480
    assert D.replication_starts(geom) == {"tp": 2, "copies": 2.0}
    # (80 GB - 31 GB / 8) / (20,480 B x 32,768) = 76.125 GB / 0.671 GB = 113 sequences on 8 x H100.
    assert D.group_capacity(geom, H100.memory_bytes, 8, CONTEXT, params=params).max_sequences == 113


def test_deepseek_v3_under_tp8_against_data_parallel_attention():
    geom, params, attention = _model("deepseek-ai/DeepSeek-V3")  # MLA: 61 layers x (512 + 64) latent
    assert geom.kv_elements_per_token * 2 == 61 * 576 * 2 == 70_272
    latent = RULES["mla_latent"].lines[-1].removeprefix("return ").replace("self.hf_text_config.", "")
    assert geom.kv_elements_per_token == geom.kv_layers * _vllm(latent, kv_lora_rank=512, qk_rope_head_dim=64, tp=8)
    tp, dp = D.layout(geom, 8), D.layout(geom, 8, D.DP_ATTENTION)
    assert (tp.replicas, tp.copies, tp.rank_bytes_per_token) == (8, 8.0, 70_272)  # the whole latent on each rank
    assert (dp.replicas, dp.copies, dp.rank_bytes_per_token) == (1, 1.0, 70_272)  # each rank its own sequences
    assert tp.megatron_divisible is None  # Megatron's query-group rule does not apply to MLA
    # Attention weights per layer (q_a 7168x1536, q_b 1536x128x192, kv_a 7168x576, kv_b 512x128x256,
    # o 128x128x7168, and the two latent norms) = 187,107,328; x 61 layers = 11.41e9, replicated under DP.
    assert attention == 61 * (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
                              + 128 * 128 * 7168)
    sequence = 70_272 * CONTEXT  # 2.30 GB of latent per 32k sequence
    plain = D.group_capacity(geom, H200.memory_bytes, 8, CONTEXT, params=params, weight_dtype="fp8")
    split = D.group_capacity(geom, H200.memory_bytes, 8, CONTEXT, D.DP_ATTENTION, params=params,
                             attention_params=attention, weight_dtype="fp8")
    assert plain.weights_per_rank == 85_625_000_000  # 685 GB of fp8 weights / 8
    assert plain.max_sequences == (141_000_000_000 - 85_625_000_000) // sequence == 24
    assert split.weights_per_rank == pytest.approx(attention + (params - attention) / 8, abs=1)
    assert split.max_sequences == 8 * ((141_000_000_000 - split.weights_per_rank) // sequence) == 152
    assert "data-parallel attention stores it once" in D.replication_sentence(geom)


def test_per_layer_kv_heads_replicate_only_where_they_run_out():
    geom = parse_geometry(json.loads(SNAPSHOT["google/gemma-4-26B-A4B"].raw_text))  # K = 8 sliding, 2 global
    assert D.max_even_tp(geom) == 2 and D.fills_node(geom) is False
    assert D.layout(geom, 2).copies == 1.0 and 1 < D.layout(geom, 8).copies < 8


def test_fills_a_node_and_the_largest_even_degree():
    llama = _model("meta-llama/Meta-Llama-3-70B")[0]
    mla = _model("deepseek-ai/DeepSeek-V3")[0]
    mqa = _model("bigcode/starcoder")[0]
    assert (D.max_even_tp(llama), D.fills_node(llama)) == (8, True)
    assert (D.max_even_tp(mla), D.fills_node(mla)) == (None, True)  # with data-parallel attention
    assert (D.max_even_tp(mqa), D.fills_node(mqa)) == (1, False)
    rwkv = parse_geometry({"model_type": "rwkv", "hidden_size": 768, "num_hidden_layers": 12})
    assert D.max_even_tp(rwkv) is None and D.fills_node(rwkv) is None
    assert D.replication_sentence(rwkv).startswith("This model keeps no per-token KV cache")


def test_unknown_inputs_stay_unknown_and_bad_ones_are_refused():
    geom = _model("meta-llama/Meta-Llama-3-70B")[0]
    assert D.group_capacity(geom, H100.memory_bytes, 8, CONTEXT).max_sequences is None  # no parameter count
    assert D.group_capacity(geom, None, 8, CONTEXT, params=7e10).max_sequences is None  # no memory
    assert D.group_capacity(geom, get_device("groq-lpu").memory_bytes, 8, CONTEXT, params=7e10).max_sequences == 0
    mla = _model("deepseek-ai/DeepSeek-V3")[0]
    assert D.weights_per_rank(6.85e11, 8, D.DP_ATTENTION) is None  # attention parameters unknown
    with pytest.raises(ValueError, match="tp must be a whole number >= 1"):
        D.layout(geom, 0)
    with pytest.raises(ValueError, match="offered for MLA models only"):
        D.layout(geom, 8, D.DP_ATTENTION)
    with pytest.raises(ValueError, match="mode must be"):
        D.layout(mla, 8, "pipeline")


def test_capacity_table_covers_every_device_degree_and_mode():
    geom, params, attention = _model("deepseek-ai/DeepSeek-V3")
    table = D.capacity_table(geom, [H100, H200], CONTEXT, params=params, attention_params=attention)
    assert table["modes"] == ["tp", "dp_attention"] and table["degrees"] == [1, 2, 4, 8, 16]
    assert len(table["layouts"]) == 10 and all(len(r["cells"]) == 10 for r in table["rows"])
    assert table["replication"] == {"tp": 2, "copies": 2.0}
