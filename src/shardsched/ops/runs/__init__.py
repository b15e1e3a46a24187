"""Runs: one run by id (its output, a retry), what is under way, the event stream of
transitions, an operator's cancel, and retrying many dead-lettered runs."""
