"""HTML pages, each with a JSON twin (``.json``) and, for lists, a CSV export (``.csv``).

Datasette's convention: the JSON twin returns exactly the data the template renders, so a
reader can cite a page and a script can fetch the same numbers. Every handler builds one
JSON-safe ``data`` dict and answers it as HTML, JSON or CSV (``rendering``). Query logic lives
in ``observatory.store.queries``, ``crawler.health`` and ``bench.store`` (shared with the /api/v1
routers); these modules only shape their answers for people. One module per page
(``base`` holds what they share); ``app.PAGE_MODULES`` includes their routers in order.

Untrusted strings (model ids, config values, query parameters) reach the templates only
through Jinja2 autoescaping; chart data is embedded with ``|tojson`` inside
``<script type="application/json">``, which the Content-Security-Policy does not execute.
"""
