#!/usr/bin/env python3
"""The Ray backend's driver process (dtx_ray/pool.py; docs/ray.md)."""
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from dtx_ray.pool import main  # noqa: E402

if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    # Not sys.exit: Ray is shut down, and no thread of a library may hold the exit up.
    os._exit(status)
