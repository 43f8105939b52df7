"""Click commands, one module per area."""
