"""The bundled GQA decode-attention kernel: Triton on CUDA, C on the CPU, PyTorch where neither runs;
a float64 reference for tests."""

from kernels.api import DecodeShape, check_inputs, gqa_decode
from kernels.reference import gqa_decode_reference

__all__ = ["DecodeShape", "check_inputs", "gqa_decode", "gqa_decode_reference"]
