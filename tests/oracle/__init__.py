"""transformers as an independent oracle for the geometry parser (see test_transformers_oracle.py)."""
