"""``shardsched bench …``: benchmarks as commands, never as timed unit tests."""
