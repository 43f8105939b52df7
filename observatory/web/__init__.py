"""The web service, and every URL the site has: the JSON API under /api/v1 (``api/``), the HTML
pages with their JSON and CSV twins (``pages/``), the app factory, errors, rendering and chart data.

May import every floor below it; nothing imports it but ``commands``.
"""
