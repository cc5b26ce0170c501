"""Streams the words of its input back one response at a time, like a token generator."""

import json
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.delay = float(config["parameters"]["DELAY_SECONDS"]["string_value"])

    def execute(self, requests):
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            threading.Thread(target=self._stream, args=(request.get_response_sender(), text.split())).start()
        return

    def _stream(self, sender, words):
        for word in words:
            if sender.is_cancelled():
                break
            out = pb_utils.Tensor("text_output", np.array([word], dtype=np.object_))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            time.sleep(self.delay)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
