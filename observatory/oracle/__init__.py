"""The second opinion: transformers builds each stored config on the meta device, in bounded
subprocesses, and its cache shapes and parameter count are set beside our geometry. Owns the probe
(``probe``, the only module that imports transformers, run in the child), the pool of children
(``pool``, ``child``), the comparison and its named deliberate differences (``compare``), and the
check that reads configs from the store and records verdicts (``check``). Imports core, settings
and store only.
"""
