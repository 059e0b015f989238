"""The optimization passes, one per module."""
