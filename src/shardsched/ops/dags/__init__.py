"""DAGs: register, read, pause, delete, restore and trigger a DAG, and its runs read back."""
