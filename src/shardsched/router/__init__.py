"""The stateless HTTP API."""
