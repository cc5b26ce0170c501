"""The implementation behind the ``triton_python_backend_utils`` module, one concern per module.

Models never import this package; they import ``triton_python_backend_utils``, which
re-exports everything here.
"""
