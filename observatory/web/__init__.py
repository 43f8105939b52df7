"""The web service: JSON API under /api/v1 and HTML pages with JSON twins."""
