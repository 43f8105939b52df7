"""The uptraining claim measured at small scale: a byte-level decoder trained from scratch on the
Python standard library's source, converted to GQA/MQA with ``observatory.convert`` and uptrained,
with held-out perplexity, KV bytes per token and decode speed (the bundled kernel) per cell, its
results stored in the store. Imports the core, settings, store, convert and kernels.
"""
