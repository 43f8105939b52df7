"""MHA -> GQA checkpoint conversion: reads a Hugging Face safetensors checkpoint one tensor at a
time, pools each group's K and V projection heads (mean, first or random, the GQA paper's three) and
writes new shards, their index and a config.json with the new num_key_value_heads. What may be
converted is decided by ``observatory.core.kv_conversion``; this package imports only the core.
"""
