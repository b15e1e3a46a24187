"""The deployment as a whole: the cluster, its status and lag over time, concurrency
keys, and the internal protocol of workers over HTTP."""
