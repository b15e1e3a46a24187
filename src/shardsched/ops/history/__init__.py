"""A schedule's past: the ledger read back, the audit over it, each tick's fate, counts
over a window and the change log."""
