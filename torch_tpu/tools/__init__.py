"""Command-line tools: op_coverage."""
