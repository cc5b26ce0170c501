"""One instance of a python model: its own ``TritonPythonModel`` object and the execute contract.

Each instance imports the model file privately (see :mod:`naiad_python.loader`), builds
``TritonPythonModel()``, calls ``initialize(args)``, and then turns every batch of core
requests into ``pb_utils.InferenceRequest`` objects, calls ``execute`` and enforces what
Triton's python backend enforces about its result (python-model-api.md §5).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from types import FrameType
from typing import Any

from naiad.backend import ErrorCode, InstanceContext, ModelInstance, NaiadError, report_compute
from naiad.backend import InferenceRequest as CoreRequest
from naiad_python import convert, loader, origin
from naiad_python.backend_model import PythonModel
from naiad_python.batch_refusal import batch_refusal, fail_requests
from naiad_python.event_loop import EventLoopThread, raised
from naiad_python.pbutils.errors import TritonError, TritonModelException
from naiad_python.pbutils.request import InferenceRequest
from naiad_python.pbutils.response import InferenceResponse
from naiad_python.user_errors import USER_ERRORS, describe, describe_traced

IS_READY_TIMEOUT_S = 5.0

_log = logging.getLogger("naiad.python")


class ContractError(Exception):
    """``execute`` broke the python-backend contract; the message is Triton's text."""


class PythonModelInstance(ModelInstance):
    """A ``TritonPythonModel`` object behind naiad's :class:`~naiad.backend.ModelInstance` interface."""

    def __init__(self, model: PythonModel, context: InstanceContext, *, copy_outputs: bool = True) -> None:
        """``copy_outputs=False`` when the response senders copy each output before ``send`` returns
        (a worker's do, into its arena): the model's arrays then go to them as they are."""
        self.name = context.name
        self._copy_outputs = copy_outputs
        self.model_name = context.model_name
        self.model_file = model.model_file
        self.decoupled = context.config.model_transaction_policy.decoupled
        self.batching = context.config.max_batch_size > 0
        self.config_outputs = [output.name for output in context.config.output]
        self._loop = EventLoopThread(context.name)
        self._ready_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._finalized = False
        where = f"python model '{context.model_name}' version {context.version} (instance '{context.name}')"
        try:
            self._unit = loader.load_model_module(
                model_name=context.model_name,
                version=context.version,
                model_dir=context.model_dir,
                model_file=model.model_file,
                tag=context.name,
                server=context.server,
            )
        except loader.ModelFileError as error:
            raise NaiadError(f"failed to load {where}: {error}", ErrorCode.NOT_FOUND) from error
        except USER_ERRORS as error:
            _log.error("failed to import %s for %s", model.model_file, where, exc_info=error)
            raise NaiadError(describe_traced(error, inspect.currentframe()), ErrorCode.INTERNAL) from error
        try:
            self._model = self._construct(context)
        except NaiadError:
            self._teardown()
            raise
        except USER_ERRORS as error:
            _log.error("initialize of %s failed", where, exc_info=error)
            self._teardown()
            raise NaiadError(describe_traced(error, inspect.currentframe()), ErrorCode.INTERNAL) from error
        self._unit.serving = True

    def _construct(self, context: InstanceContext) -> Any:
        model_class = getattr(self._unit.module, "TritonPythonModel", None)
        if model_class is None:
            raise NaiadError(
                f"python model file '{self.model_file}' of model '{self.model_name}' does not define class "
                "TritonPythonModel",
                ErrorCode.INVALID_ARG,
            )
        model = model_class()
        initialize = getattr(model, "initialize", None)
        if initialize is not None:
            args = {
                "model_config": context.config_json,
                "model_instance_kind": context.kind,
                "model_instance_name": context.name,
                "model_instance_device_id": str(context.device_id),
                "model_repository": str(context.model_dir),
                "model_version": str(context.version),
                "model_name": context.model_name,
            }
            result = initialize(args)
            if inspect.iscoroutine(result):
                self._loop.run(result)
        return model

    # -- execute -------------------------------------------------------------------------------

    def execute(self, requests: Sequence[CoreRequest]) -> None:
        """Run one batch and answer every request through its sender (see the module docstring)."""
        refused = batch_refusal(requests, self.batching)
        if refused is not None:
            fail_requests(requests, refused)
            return
        batch = [
            convert.received_request(
                request, decoupled=self.decoupled, config_outputs=self.config_outputs, copy_outputs=self._copy_outputs
            )
            for request in requests
        ]
        with origin.serving(requests):  # BLS calls made inside are the batch's children
            self.execute_received(batch, partial(report_compute, requests))
        for request, received in zip(requests, batch, strict=True):
            request.rescheduled = received._rescheduled()
            request.answered_later = not self.decoupled and received._answered_later()

    def execute_received(self, batch: list[InferenceRequest], report: Callable[[int, int], None]) -> None:
        """Run ``execute`` on ``batch``, requests already in their ``pb_utils`` form, and enforce its contract.

        ``report(start_ns, end_ns)`` gets the compute phase: it starts once the requests are converted
        and ends when ``execute`` returned, before its responses go out.
        """
        try:
            execute = getattr(self._model, "execute", None)
            if execute is None:
                raise ContractError(f"Python model {self.model_file} does not implement `execute` method.")
            start = time.monotonic_ns()
            returned = execute(batch)
            if inspect.iscoroutine(returned):
                if self.decoupled:  # runs in the background: its compute ends when execute returned it
                    report(start, time.monotonic_ns())
                    future = self._loop.submit(returned)  # the coroutine's task copies the context
                    future.add_done_callback(partial(self._background_done, batch))
                    return
                returned = self._loop.run(returned)
            report(start, time.monotonic_ns())
            self._process_returned(batch, returned)
        except USER_ERRORS as error:
            self._fail_batch(batch, error, inspect.currentframe())
        if not self.decoupled:
            self._answer_missing(batch)

    def _process_returned(self, batch: list[InferenceRequest], returned: object) -> None:
        if returned is None:
            return
        if self.decoupled:
            raise ContractError(
                f"Python model '{self.name}' is using the decoupled mode and the execute function must return None."
            )
        if not isinstance(returned, list):
            raise ContractError(f"Expected a list in the execute return, found type '{type(returned)}'.")
        if len(returned) != len(batch):
            raise ContractError(
                "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
                f"InferenceRequest(s) size is:{len(batch)}, "
                f"and InferenceResponse(s) size is:{len(returned)}\n"
            )
        for request, response in zip(batch, returned, strict=True):
            if response is None:
                continue
            if request._rescheduled():
                raise ContractError(
                    "Expected a None object in the execute function return list for reschduled request, found "
                    f"type '{type(response)}'."
                )
            if not isinstance(response, InferenceResponse):
                raise ContractError(
                    "Expected an 'InferenceResponse' object in the execute function return list, found type "
                    f"'{type(response)}'."
                )
            try:
                request._response_sender()._check_returned(response)
            except TritonModelException as error:
                raise ContractError(str(error)) from None
        for request, response in zip(batch, returned, strict=True):
            if response is not None:
                request._response_sender()._send_returned(response)

    def _background_done(self, batch: list[InferenceRequest], future: concurrent.futures.Future[object]) -> None:
        """Completion of a decoupled ``async def execute``: fail the batch if it raised."""
        error: BaseException
        if future.cancelled():
            error = ContractError(f"model '{self.model_name}' was unloaded before its async execute finished")
        else:
            exception = raised(future)
            if exception is None:
                if future.result() is None:
                    return
                error = ContractError(
                    f"Python model '{self.name}' is using the decoupled mode and the execute function must return None."
                )
            else:
                error = exception
        self._fail_batch(batch, error, None)  # the coroutine's frames are all that is left of its stack

    def _fail_batch(self, batch: list[InferenceRequest], error: BaseException, caller: FrameType | None) -> None:
        """Answer every request of the batch that is still open with Triton's INTERNAL error
        (``caller``: the frame that ran ``execute``, where the error's ``At:`` block ends)."""
        text = str(error) if isinstance(error, ContractError) else describe_traced(error, caller)
        # Triton names the instance here ("<group>_<index>"), not the model.
        message = f"Failed to process the request(s) for model '{self.name}', message: {text}"
        _log.error("%s", message.rstrip(), exc_info=None if isinstance(error, ContractError) else error)
        triton_error = TritonError(message, TritonError.INTERNAL)
        for request in batch:
            try:
                request._response_sender()._fail(triton_error)
            except Exception:  # the client side may already be gone; keep failing the others
                _log.exception("could not send the error response for model '%s'", self.model_name)

    def _answer_missing(self, batch: list[InferenceRequest]) -> None:
        """Non-decoupled: deliver responses still waiting for a final flag, fail requests with none,
        but for those whose response sender the model took: it may answer them later, from another
        thread, as Triton lets it."""
        for index, request in enumerate(batch):
            if request._rescheduled():  # answered by a later execution
                continue
            sender = request._response_sender()
            try:
                if sender._finish() or sender._taken:  # answered, or the model answers it later
                    continue
                sender._fail(
                    TritonError(
                        f"Python model '{self.model_name}' sent no response for request {index} of the "
                        f"batch (request id '{request.request_id()}'): execute() returned None for it and "
                        "did not send one through request.get_response_sender(); return an "
                        "InferenceResponse for every request, or send one with "
                        "flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL",
                        TritonError.INTERNAL,
                    )
                )
            except Exception:  # e.g. an output that cannot be converted; naiad answers it instead
                _log.exception("could not send the response of model '%s'", self.model_name)

    # -- readiness and unload --------------------------------------------------------------------

    async def is_ready(self) -> bool:
        """The model's ``is_ready()``, False on error or after 5 s; True if it has none.

        A sync ``is_ready`` runs on the instance's readiness thread, an ``async def`` one (or the
        coroutine a sync one returns) on the instance's event loop; the server's loop only awaits.
        """
        method = getattr(self._model, "is_ready", None)
        if method is None:
            return True
        try:
            async with asyncio.timeout(IS_READY_TIMEOUT_S):
                if inspect.iscoroutinefunction(method):
                    result = await asyncio.wrap_future(self._loop.submit(method()))
                else:
                    result = await asyncio.wrap_future(self._ready_executor().submit(method))
                    if inspect.iscoroutine(result):
                        result = await asyncio.wrap_future(self._loop.submit(result))
            return bool(result)
        except TimeoutError:
            _log.warning("is_ready() of model '%s' took more than %g s", self.model_name, IS_READY_TIMEOUT_S)
            return False
        except USER_ERRORS as error:
            _log.warning("is_ready() of model '%s' raised %s", self.model_name, describe(error), exc_info=error)
            return False

    def _ready_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The single thread sync ``is_ready`` calls run on, started on first use."""
        if self._ready_pool is None:
            self._ready_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"naiad-python-ready-{self.name}"
            )
        return self._ready_pool

    def finalize(self) -> None:
        """Call the model's ``finalize()`` (errors are logged), then release the instance."""
        if self._finalized:
            return
        self._finalized = True
        self._unit.serving = False
        method = getattr(self._model, "finalize", None)
        if method is not None:
            try:
                result = method()
                if inspect.iscoroutine(result):
                    self._loop.run(result)
            except USER_ERRORS as error:
                _log.error("finalize() of model '%s' raised %s", self.model_name, describe(error), exc_info=error)
        self._teardown()

    def _teardown(self) -> None:
        self._loop.stop()
        if self._ready_pool is not None:
            self._ready_pool.shutdown(wait=False, cancel_futures=True)
        unit = getattr(self, "_unit", None)
        if unit is not None:
            loader.unload_model_module(unit)
