"""The bundled, curated data and its loaders: the snapshot of notable models (and its export), the
hardware catalog, prices, research results and what claims are checked on; the files are in ``data/``.

Imports ``core``, ``settings`` and ``store`` (the snapshot is written through ``store.ingest``); serves no HTTP.
"""
