"""dtx from Python (docs/python.md): the measurement worker and the version of the worker
protocol (docs/worker-protocol.md) the package and the binaries speak."""

__version__ = "0.1.0"
# The JSON-lines protocol between the explorer and its measurement worker: the C++ binaries
# (Protocol.h) and src/dtx/worker.py (PROTOCOL) must say the same.
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__"]
