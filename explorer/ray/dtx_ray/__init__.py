"""dtx's Ray backend: measurement workers on a Ray cluster (docs/ray.md).

- host.py: one worker process (explorer/worker/dtx_worker.py) with deadlines and replacement;
- actors.py: the Ray actor hosting one (timing on a GPU, or compile on a CPU);
- scheduler.py: which node and actor takes each request; re-sending when an actor is lost;
- pool.py: the driver process that explorer/src/RayBackend.cpp speaks to.
"""
