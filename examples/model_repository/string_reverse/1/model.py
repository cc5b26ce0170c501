"""Reverses the bytes of every element of a BYTES tensor."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            reversed_text = np.array([item[::-1] for item in text.reshape(-1)], dtype=np.object_)
            out = pb_utils.Tensor("REVERSED", reversed_text.reshape(text.shape))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
