"""The bundled decode-attention kernels: GQA (``gqa_decode``) and absorbed MLA (``mla_decode``), each
Triton on CUDA, C on the CPU, PyTorch where neither runs; float64 references for tests."""

from kernels.api import DecodeShape, check_inputs, gqa_decode, mla_decode
from kernels.reference import gqa_decode_reference, mla_decode_reference

__all__ = ["DecodeShape", "check_inputs", "gqa_decode", "gqa_decode_reference", "mla_decode",
           "mla_decode_reference"]
