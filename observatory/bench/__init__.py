"""Spot-benchmarks: a model's decode-attention shape run with the bundled kernel and its peers on the
local device, against the device's measured copy ceiling and the roofline prediction."""
