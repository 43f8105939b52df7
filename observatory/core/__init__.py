"""The pure core: plain values in, plain values out; no database, HTTP, files or clock.

- ``geometry`` / ``config_dialects``: what a config.json says about attention.
- ``kvcache``: what that geometry's KV cache costs.
- ``roofline``: how fast decode can run on a device (takes any object with the device fields).
- ``tiers``: a device's memory tiers (on-chip SRAM, off-chip DRAM) and where a step's bytes sit.
- ``deployment``: a model over TP devices: KV heads sharded or replicated (vLLM's rules), MLA's
  latent under plain TP and data-parallel attention, the sequences a TP group holds.
- ``capacity``: the median new model's room on each device generation.
- ``trends``: aggregates of plain rows per period.
- ``repo_ids``: what a valid Hub repository id looks like.

Everything with I/O (hub, crawler, store, web, alerts, bench) sits around this package and
imports from it, never the other way round; ``tests/unit/test_layering.py`` checks that.
"""
