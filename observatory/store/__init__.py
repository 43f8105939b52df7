"""The store: engine and sessions (``db``), the core tables, the write path (``ingest``), leases,
re-derivation, trend precomputation (``trends``) and the read queries by resource (``queries``).

Imports ``core`` and ``settings`` only; nothing in it knows HTTP, the Hub or the bundled files.
"""
