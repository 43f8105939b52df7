"""Hub access through ``huggingface_hub``'s session: the session and its hooks (``session``),
the retry policy every request goes through (``policy``), deadlines and stop requests at the
socket (``transport``), listings (``listing``), config.json fetches (``files``) and rate limits
(``ratelimit``). Endpoint and token come from settings, never from import-time environment reads."""
