"""The command line: one click command module per area (serve, worker, crawl, db, snapshot,
bench, alerts, inspect), wired together in ``observatory.cli``. The top floor: may import anything.
"""
