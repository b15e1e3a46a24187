"""Shard actors, their manager, and next-fire arithmetic."""
