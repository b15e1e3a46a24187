"""Notifications: channels, rules and deliveries, and Alertmanager's alerts."""
