"""naiad's private protobuf descriptor pool.

naiad's generated ``*_pb2`` modules add their files here instead of protobuf's
default pool, so they never clash with tritonclient's copies of the same
``inference.*`` schema loaded in the same process.
"""

from __future__ import annotations

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
"""The pool holding every file of ``naiad.protocol``."""
