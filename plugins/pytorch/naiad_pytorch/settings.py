"""torch's process-wide knobs the PyTorch backend parameters turn, applied the way Triton does.

* Thread pools (``INTRA_OP_THREAD_COUNT``, ``INTER_OP_THREAD_COUNT``) belong to the process:
  like Triton (``std::call_once``), the first model that sets one wins and later values are
  logged and ignored. torch refuses to resize the inter-op pool once parallel work ran; that is
  logged too, never a load error.
* Per-execution flags are set before every ``forward`` (Triton sets them in each
  ``Execute``): the graph-executor optimisation switch is per thread, the JIT profiling/executor
  modes, the tensor-expression fuser and cuDNN are process-wide, so models that set them
  differently take turns, as in Triton.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import torch

from naiad_pytorch.parameters import TorchParameters

_log = logging.getLogger("naiad.pytorch")
_lock = threading.Lock()
_threads_set_by: dict[str, tuple[str, int]] = {}  # pool -> (model, value)

INTRA_OP = "intra-op"
INTER_OP = "inter-op"


def configure_threads(model_name: str, parameters: TorchParameters) -> None:
    """Apply the model's thread counts unless an earlier model already set them."""
    if parameters.intra_op_threads is not None:
        set_threads(model_name, "INTRA_OP_THREAD_COUNT", INTRA_OP, parameters.intra_op_threads)
    if parameters.inter_op_threads is not None:
        set_threads(model_name, "INTER_OP_THREAD_COUNT", INTER_OP, parameters.inter_op_threads)


def set_threads(model_name: str, key: str, pool: str, value: int) -> None:
    """Size ``pool`` (:data:`INTRA_OP` or :data:`INTER_OP`) as parameter ``key`` of the model asks,
    unless an earlier model sized it; a value below 1 leaves torch alone."""
    if value < 1:
        return
    apply: Callable[[str, int], None] = _set_intra_op if pool == INTRA_OP else _set_inter_op
    with _lock:
        earlier = _threads_set_by.get(pool)
        if earlier is None:
            _threads_set_by[pool] = (model_name, value)
            apply(model_name, value)
            return
    if earlier[1] != value:
        _log.warning(
            "model '%s': %s=%d ignored: torch thread pools are process-wide and model '%s' already set %d",
            model_name,
            key,
            value,
            earlier[0],
            earlier[1],
        )


def _set_intra_op(model_name: str, value: int) -> None:
    torch.set_num_threads(value)
    _log.info("Intra op thread count is set to %d for model instance '%s'", torch.get_num_threads(), model_name)


def _set_inter_op(model_name: str, value: int) -> None:
    try:
        torch.set_num_interop_threads(value)
    except RuntimeError as error:
        _log.warning(
            "model '%s': INTER_OP_THREAD_COUNT=%d could not be applied (%s); torch keeps %d inter-op threads. "
            "torch sizes this pool once per process, before the first parallel work: load this model first "
            "or set it through the model that loads first",
            model_name,
            value,
            str(error).strip(),
            torch.get_num_interop_threads(),
        )
        return
    _log.info("Inter op thread count is set to %d for model instance '%s'", torch.get_num_interop_threads(), model_name)


def apply_execution_flags(parameters: TorchParameters) -> None:
    """Set torch's JIT and cuDNN switches for one execution, as Triton's ``Execute`` does."""
    torch._C._set_graph_executor_optimize(parameters.optimized_execution)
    if parameters.jit_profiling is not None:
        torch._C._jit_set_profiling_mode(parameters.jit_profiling)
    if parameters.jit_executor is not None:
        torch._C._jit_set_profiling_executor(parameters.jit_executor)
    if parameters.tensor_fuser is not None:
        torch._C._jit_set_texpr_fuser_enabled(parameters.tensor_fuser)
    torch.backends.cudnn.enabled = parameters.cudnn
