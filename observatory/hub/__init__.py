"""Hub access through ``huggingface_hub``: the session (``session``), listings (``listing``),
config.json fetches (``files``) and rate limits (``ratelimit``). Endpoint and token come from
settings, never from import-time environment reads."""
