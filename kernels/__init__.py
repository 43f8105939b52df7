"""The bundled GQA decode-attention kernel: Triton on CUDA, PyTorch elsewhere, float64 reference for tests."""

from kernels.api import DecodeShape, check_inputs, gqa_decode
from kernels.reference import gqa_decode_reference

__all__ = ["DecodeShape", "check_inputs", "gqa_decode", "gqa_decode_reference"]
