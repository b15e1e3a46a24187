"""The worker: claim loop and subprocess runner."""
