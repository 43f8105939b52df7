"""The crawler: discovers new Hub models newest-first and records each one's config.json.

``run.crawl`` is the entry point; ``scope`` says which models count, ``marks`` where a run
stops, ``store`` reads and writes the crawler's state, ``failures`` what to do about errors.
"""
