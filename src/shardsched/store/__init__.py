"""The store: Redis key names, record field maps, the Lua scripts and their typed
wrappers, and the Redis clients. Everything that knows how state is laid out in Redis."""
