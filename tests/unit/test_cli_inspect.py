"""``observatory inspect``: in-process through CliRunner, and as the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import observatory
from observatory.commands.inspect import inspect

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"
EXPECTED = {e["file"]: e for e in json.loads((Path(__file__).parents[1] / "data" / "expected.json").read_text())}
CONSOLE_SCRIPT = Path(sys.executable).parent / "observatory"
REQUIRED_KEYS = {"model_type", "attention_kind", "num_query_heads", "num_kv_heads", "group_size", "head_dim",
                 "num_layers", "kv_layers", "sliding_window", "kv_cache_bytes_per_token", "warnings"}


def run(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(inspect, list(args), input=input)


def assert_matches_expected(report: dict, expected: dict, element_bytes: int = 2) -> None:
    assert REQUIRED_KEYS <= report.keys()
    for key in ("attention_kind", "num_query_heads", "num_kv_heads", "group_size", "head_dim", "num_layers",
                "kv_layers", "sliding_window", "kv_cache_elements_per_token"):
        assert report[key] == expected[key], key
    assert report["kv_cache_bytes_per_token"] == expected["kv_cache_elements_per_token"] * element_bytes


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_json_for_every_bundled_config(name):
    result = run("--json", str(CONFIG_DIR / name))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # exactly one JSON object
    assert_matches_expected(report, EXPECTED[name])
    assert report["path"] == str(CONFIG_DIR / name) and report["dtype"] == "bf16"


def test_json_details_and_dtype():
    result = run("--json", "--dtype", "fp8", str(CONFIG_DIR / "meta-llama__Llama-2-70b-hf.json"))
    report = json.loads(result.stdout)
    assert report["kv_cache_bytes_per_token"] == 163840 and report["dtype"] == "fp8"
    assert report["mha_counterfactual_bytes_per_token"] == 8 * 163840 and report["saving_ratio"] == 8.0
    assert report["kv_at_context"]["4096"] == {"batch": 1, "bytes": 4096 * 163840,
                                               "mha_counterfactual_bytes": 8 * 4096 * 163840}
    assert set(report["kv_at_context"]) == {"4096", "32768", "131072"}
    assert report["sources"]["num_kv_heads"] == "num_key_value_heads" and report["mla"] is None
    assert report["layer_kinds"] == ["full"] * 80


def test_text_summary():
    result = run(str(CONFIG_DIR / "google__gemma-3-27b-it.json"))
    assert result.exit_code == 0
    out = result.stdout
    for fragment in ("gemma3 (Gemma3ForConditionalGeneration)", "GQA: H=32, K=16, G=2, d=128",
                     "62, of which 62 hold a KV cache", "sliding 1,024 tokens on 52 of 62 layers",
                     "253,952 elements = 507,904 bytes (bf16)", "MHA (K=H)", "128k", "2.0x", "warnings       none"):
        assert fragment in out, fragment


def test_text_summary_marks_contexts_beyond_max_position_embeddings():
    # Llama-3-8B reads 8,192 positions: its 32k and 128k rows are marked as the model page marks them
    lines = run(str(CONFIG_DIR / "meta-llama__Meta-Llama-3-8B.json")).stdout.splitlines()
    rows = {line.split()[0]: line for line in lines if line.strip().split()[:1] in (["4k"], ["32k"], ["128k"])}
    assert set(rows) == {"4k", "32k", "128k"}
    assert "beyond max context" not in rows["4k"]
    assert rows["32k"].endswith("beyond max context (8,192)") and rows["128k"].endswith("beyond max context (8,192)")


def test_text_summary_mla_hybrid_and_warnings():
    mla = run(str(CONFIG_DIR / "deepseek-ai__DeepSeek-V3.json")).stdout
    assert "MLA: H=128, K=128, G=n/a (MLA), d=192, d_v=128" in mla and "512 + 64 = 576 elements" in mla
    assert "71.1x" in mla and "multi-token-prediction" in mla
    hybrid = run(str(CONFIG_DIR / "Qwen__Qwen3.5-9B.json")).stdout
    assert "GQA, hybrid" in hybrid and "32, of which 8 hold a KV cache" in hybrid
    scout = run(str(CONFIG_DIR / "meta-llama__Llama-4-Scout-17B-16E-Instruct.json")).stdout
    assert "chunked 8,192 tokens on 36 of 48 layers" in scout


def test_attention_free_model():
    result = run("-", input=json.dumps({"model_type": "rwkv", "hidden_size": 2048, "num_hidden_layers": 24}))
    assert result.exit_code == 0 and "attention      none" in result.stdout
    report = json.loads(run("--json", "-", input='{"model_type": "mamba", "d_model": 768, "n_layer": 24}').stdout)
    assert report["attention_kind"] == "none" and report["kv_cache_bytes_per_token"] == 0


def test_stdin():
    text = (CONFIG_DIR / "THUDM__codegeex2-6b.json").read_text()
    report = json.loads(run("--json", "-", input=text).stdout)
    assert report["path"] == "<stdin>" and report["num_kv_heads"] == 2


@pytest.mark.parametrize("args, stdin, message", [
    (["missing.json"], None, "Error: missing.json: cannot read: No such file or directory"),
    (["-"], "not json", "Error: <stdin>: not valid JSON: Expecting value (line 1, column 1)"),
    (["-"], "[1, 2]", "Error: <stdin>: config must be a JSON object, got an array"),
    (["-"], '{"hidden_size": 4096, "num_hidden_layers": 2}', "Error: <stdin>: no attention head count"),
    (["--json", "-"], '{"num_attention_heads": 32, "num_key_value_heads": 5, "hidden_size": 4096, '
                      '"num_hidden_layers": 2}', "is not divisible by num_key_value_heads=5"),
    (["-"], b"\xff\xfe\x00", "not UTF-8"),
], ids=["missing", "not-json", "array", "no-heads", "indivisible", "binary"])
def test_errors_are_one_line(args, stdin, message):
    result = run(*args, input=stdin)
    assert result.exit_code == 1 and result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_directory_and_usage_errors(tmp_path):
    result = run(str(tmp_path))
    assert result.exit_code == 1 and "cannot read" in result.stderr and result.stderr.count("\n") == 1
    assert run().exit_code == 2  # no PATH
    assert run("--dtype", "fp4", "-", input="{}").exit_code == 2
    assert "PATH" in run("--help").stdout


def test_several_paths_print_one_json_object_per_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    names = ["microsoft__phi-4.json", "tiiuae__falcon-180B.json"]
    result = run("--json", *(str(CONFIG_DIR / n) for n in names), str(bad))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [json.loads(line)["num_kv_heads"] for line in lines] == [10, 8]
    assert result.stderr.startswith(f"Error: {bad}: not valid JSON") and result.stderr.count("\n") == 1


# --- the installed console script, in a real process -------------------------------------------

def console(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    assert CONSOLE_SCRIPT.exists(), f"console script not installed at {CONSOLE_SCRIPT}"
    return subprocess.run([str(CONSOLE_SCRIPT), *args], input=stdin, capture_output=True, timeout=120)


def test_console_script_over_every_bundled_config():
    files = sorted(CONFIG_DIR.glob("*.json"))
    proc = console("inspect", "--json", *map(str, files))
    assert proc.returncode == 0, proc.stderr.decode()
    reports = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [Path(r["path"]).name for r in reports] == [f.name for f in files]
    checked = [r for r in reports if Path(r["path"]).name in EXPECTED]  # the hand-worked set
    assert len(checked) == len(EXPECTED)
    for report in checked:
        assert_matches_expected(report, EXPECTED[Path(report["path"]).name])


def test_console_script_single_file_stdin_and_error():
    one = console("inspect", "--json", "--dtype", "fp32", str(CONFIG_DIR / "moonshotai__Kimi-K2-Instruct.json"))
    assert one.returncode == 0
    assert_matches_expected(json.loads(one.stdout), EXPECTED["moonshotai__Kimi-K2-Instruct.json"], 4)
    piped = console("inspect", "-", stdin=(CONFIG_DIR / "openai-community__gpt2-xl.json").read_bytes())
    assert piped.returncode == 0 and b"MHA: H=25, K=25, G=1, d=64" in piped.stdout
    broken = console("inspect", "-", stdin=b'{"n_head": 0, "n_layer": 2, "n_embd": 64}')
    assert broken.returncode == 1 and broken.stdout == b""
    assert broken.stderr == b"Error: <stdin>: n_head is 0; it must be at least 1\n"


def test_whisper_exits_zero_with_decoder_numbers():
    path = str(CONFIG_DIR / "openai__whisper-large-v3-turbo.json")
    result = run(path)
    assert result.exit_code == 0, result.output
    for fragment in ("MHA: H=20, K=20, G=1, d=64", "4 decoder (encoder: 32), of which 4 hold a KV cache",
                     "10,240 elements = 20,480 bytes (bf16) per generated token",
                     "cross-attn     10,240 elements = 20,480 bytes per source (encoder) token"):
        assert fragment in result.stdout, fragment
    report = json.loads(run("--json", "--dtype", "fp8", path).stdout)
    assert report["is_encoder_decoder"] and report["encoder_layers"] == 32 and report["num_layers"] == 4
    assert report["kv_cache_bytes_per_token"] == report["cross_kv_cache_bytes_per_source_token"] == 10240


def test_t5_with_fewer_decoder_than_encoder_layers_from_stdin():
    cfg = json.loads((CONFIG_DIR / "google-t5__t5-small.json").read_text()) | {"num_layers": 24, "num_decoder_layers": 4}
    result = run("--json", "-", input=json.dumps(cfg))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["num_layers"], report["encoder_layers"], report["kv_layers"]) == (4, 24, 4)
    assert report["kv_cache_elements_per_token"] == 4 * 2 * 8 * 64 and report["kv_cache_bytes_per_token"] == 8192
    assert report["kv_at_context"]["4096"]["bytes"] == 4096 * 8192
    assert "4 decoder (encoder: 24), of which 4 hold a KV cache" in run("-", input=json.dumps(cfg)).stdout


def test_encoder_only_model_has_no_cache_table():
    result = run(str(CONFIG_DIR / "google-bert__bert-base-uncased.json"))
    assert result.exit_code == 0, result.output
    assert "12 encoder layers, none of which holds a KV cache" in result.stdout and "128k" not in result.stdout
    report = json.loads(run("--json", str(CONFIG_DIR / "google-bert__bert-base-uncased.json")).stdout)
    assert report["encoder_only"] and report["kv_cache_bytes_per_token"] == 0 and report["saving_ratio"] is None
    assert report["kv_at_context"]["131072"]["bytes"] == 0


def test_uncertain_geometry_is_flagged():
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 3,
           "layer_types": ["full_attention", "wavelet", "wavelet"]}
    result = run("-", input=json.dumps(cfg))
    assert result.exit_code == 0 and "uncertain      yes" in result.stdout
    assert 'unknown layer type "wavelet" counted as a full KV layer (upper bound)' in result.stdout
    assert json.loads(run("--json", "-", input=json.dumps(cfg)).stdout)["uncertain"] is True


def test_gemma4_per_layer_heads_and_dims_in_the_summary():
    out = run(str(CONFIG_DIR / "google__gemma-4-26B-A4B.json")).stdout
    assert "K=8 (2 on some layers), G=2, d=256 (512 on full-attention layers)" in out
    assert "112,640 elements = 225,280 bytes (bf16)" in out


def test_text_summary_says_when_one_tensor_is_key_and_value():
    result = run(str(CONFIG_DIR / "deepseek-ai__DeepSeek-V4-Flash.json"))
    assert result.exit_code == 0
    assert "MQA: H=64, K=1, G=64, d=512 (one tensor is both K and V)" in result.output
    assert "22,016 elements = 44,032 bytes (bf16)" in result.output  # 43 layers x 512, once
    assert "both K and V" not in run(str(CONFIG_DIR / "deepseek-ai__DeepSeek-V3.json")).output
