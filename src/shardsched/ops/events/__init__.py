"""Operations on events: one emitted or received by a signed hook, stored, delivered and
settled (store/event_delivery.py), read back and listed; and the hooks themselves."""
