"""batchppo."""
