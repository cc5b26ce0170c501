"""naiad in-process: serve a model repository inside a Python program, with no network.

::

    import numpy as np
    import naiad

    with naiad.Server("models") as server:
        response = server.infer("add_sub", {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)})
        print(response["OUTPUT0"])

Requests go through the same entry point as HTTP and gRPC ones (validation, scheduling,
statistics, cancellation, streaming); errors raise :class:`naiad.NaiadError` with Triton's
message and code. See docs/pipelines.md.
"""

from naiad.embedded.inputs import Inputs
from naiad.embedded.responses import AsyncResponseStream, Response, ResponseStream
from naiad.embedded.server import Server

__all__ = ["AsyncResponseStream", "Inputs", "Response", "ResponseStream", "Server"]
