"""The Triton kernel against the float64 references, GQA and absorbed MLA: in Triton's interpreter on the
CPU, compiled on CUDA.

The interpreter needs ``TRITON_INTERPRET=1`` before Triton is first imported, so the cases run in a
child process (``kernel_support.py`` as a script) and each is checked here; this process's Triton,
if any, is left as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from kernel_support import (
    ROOT,
    TRITON_CASES,
    TRITON_MLA_CASES,
    assert_close,
    run_triton_cases,
)

pytest.importorskip("triton")
ALL_CASES = TRITON_CASES + TRITON_MLA_CASES


@pytest.fixture(scope="module")
def interpreter_results() -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("kernel_support.py"))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)["cases"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_interpreter_matches_reference(interpreter_results, case):
    result = interpreter_results[case.id]
    assert result["wrote_into_out"]
    assert_close(case, result)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_compiled_kernel_matches_reference(case):
    result = run_triton_cases([case], device="cuda")[case.id]
    assert_close(case, result)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", [replace(c, id=c.id + "-bf16", dtype="bf16") for c in ALL_CASES],
                         ids=lambda c: c.id)
def test_compiled_kernel_in_bf16(case):  # the interpreter cannot compute in bf16; the GPU can
    assert_close(case, run_triton_cases([case], device="cuda")[case.id])


def test_cpu_tensors_without_the_interpreter_are_refused():
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("this process runs Triton in interpreter mode")
    from kernels import gqa_decode

    q, k, v = torch.zeros(1, 4, 64), torch.zeros(1, 8, 2, 64), torch.zeros(1, 8, 2, 64)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        gqa_decode(q, k, v, torch.tensor([8], dtype=torch.int32), backend="triton")


def test_bf16_is_refused_by_the_interpreter():
    from kernels import gqa_decode

    q, k = torch.zeros(1, 4, 64, dtype=torch.bfloat16), torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="bfloat16"):
        gqa_decode(q, k, k, torch.tensor([8], dtype=torch.int32), backend="triton")


@pytest.mark.parametrize(("batch", "kv_programs", "capacity", "sms", "expected"), [
    (1, 8, 32768, 132, 33),  # batch 1, long context: enough splits to cover 2 x 132 SMs
    (8, 8, 32768, 132, 5),
    (64, 8, 32768, 132, 1),  # the batch alone fills the device
    (1, 8, 1000, 132, 4),  # short sequences: no split under MIN_SPLIT_TOKENS
    (1, 1, 1, 132, 1),
])
def test_choose_splits(batch, kv_programs, capacity, sms, expected):
    from kernels.triton_decode import choose_splits

    assert choose_splits(batch, kv_programs, capacity, sms) == expected
