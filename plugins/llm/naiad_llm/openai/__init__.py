"""The OpenAI-compatible API (``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``).

A client of Triton's vLLM-backend tensors (``text_input``, ``sampling_parameters``, ``text_output``,
...) through the server handle, so it serves any model that speaks them, whatever its backend.
"""
