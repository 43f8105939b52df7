"""The JSON API under /api/v1, one router module per resource (models, trends, hardware, crawl,
claims, alerts, docs); ``common`` holds what they share. Response shapes are declared here or in
the store's queries, so OpenAPI describes every answer.
"""
