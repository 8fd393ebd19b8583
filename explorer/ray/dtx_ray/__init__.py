"""dtx's Ray backend: measurement workers on a Ray cluster (docs/ray.md), placed and driven by the
scheduler of explorer/src/MeasurementScheduler.cpp through one driver process.

- host.py: one worker process (src/dtx/worker.py): start, exchange, kill;
- actors.py: the Ray actor hosting one (timing on a GPU, or compile on a CPU);
- pool.py: the driver process that explorer/src/RayBackend.cpp speaks to.
"""
