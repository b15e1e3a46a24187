"""Who may do what: a team's view of ids, and API tokens."""
