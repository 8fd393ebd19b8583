"""dtx from Python (docs/python.md): a client for dtxd's HTTP API and the version of the
worker protocol (docs/worker-protocol.md) the package and the binaries speak."""
from dtx.client import (AuthError, BadRequest, Client, Conflict, DtxError, NotFound,
                        ServerError, load_module)

__version__ = "0.1.0"
# The JSON-lines protocol between the explorer and its measurement worker: the C++ binaries
# (Protocol.h) and src/dtx/worker.py (PROTOCOL) must say the same.
PROTOCOL_VERSION = 1

__all__ = ["AuthError", "BadRequest", "Client", "Conflict", "DtxError", "NotFound",
           "PROTOCOL_VERSION", "ServerError", "__version__", "load_module"]
