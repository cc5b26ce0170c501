"""Per-request sampling inside transformers' continuous batching, as one logits processor.

The manager samples every row of a batch with one global setting. This processor takes over: for
each row it applies that request's repetition, presence and frequency penalties, removes the tokens
its JSON schema forbids, applies temperature, top-k, min-p and top-p, draws the token with the
request's own seeded generator and masks every other token, so the manager's greedy pick
(``do_sample=False``) returns exactly that token. Rows find their request through one int32 argument
per row, the slot id written when the batch is prepared (which stays right when the manager prepares
the next batch before the current one is computed).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from transformers import LogitsProcessorList
from transformers.generation.continuous_batching.cb_logits_processors import (
    ContinuousBatchingLogitsProcessor,
    ContinuousBatchingLogitsProcessorList,
)

from naiad_llm.engine import SamplingSettings

if TYPE_CHECKING:
    from naiad_llm.engines.json_grammar import TokenGuide

END_OF_ROWS = -1


@dataclass(slots=True)
class TokenRecord:
    """What the sampler knows of one drawn token: its raw log-probability and the top alternatives."""

    token: int
    logprob: float
    top: dict[int, float] = field(default_factory=dict)


@dataclass(slots=True)
class RequestSampling:
    """One request's sampling state, shared by the engine (loop thread) and the generation thread."""

    settings: SamplingSettings
    generator: torch.Generator
    history: list[int]
    guide: TokenGuide | None = None  # the JSON schema the output must follow
    records: list[TokenRecord] = field(default_factory=list)
    enders: torch.Tensor | None = None  # tokens that end the output: held back until min_tokens are drawn


class RequestSampler(ContinuousBatchingLogitsProcessor):
    """Samples each row with its request's settings; see the module docstring."""

    supported_kwargs: dict[str, type] = {}
    ignored_kwargs: tuple[str, ...] = ()

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._lock = threading.Lock()
        self._slots: dict[int, RequestSampling] = {}
        self._slot_of: dict[str, int] = {}
        self._next_slot = 0

    def add(
        self,
        request_id: str,
        settings: SamplingSettings,
        prompt_ids: list[int],
        guide: TokenGuide | None = None,
        enders: tuple[int, ...] = (),
    ) -> RequestSampling:
        """Register a request before it is added to the manager."""
        generator = torch.Generator(device=self._device)
        if settings.seed is None:
            generator.seed()
        else:
            generator.manual_seed(settings.seed)
        held = torch.tensor(enders, dtype=torch.long, device=self._device) if enders and settings.min_tokens else None
        sampling = RequestSampling(settings, generator, list(prompt_ids), guide, enders=held)
        with self._lock:
            slot = self._next_slot
            self._next_slot = (self._next_slot + 1) % (2**31 - 1)
            self._slots[slot] = sampling
            self._slot_of[request_id] = slot
        return sampling

    def remove(self, request_id: str) -> None:
        """Forget a finished or cancelled request."""
        with self._lock:
            slot = self._slot_of.pop(request_id, None)
            if slot is not None:
                self._slots.pop(slot, None)

    def fill_defaults(self, int32_tensor: torch.Tensor) -> None:
        int32_tensor.fill_(END_OF_ROWS)

    def prepare_tensor_args(self, requests_with_new_token: list[Any]) -> torch.Tensor:
        with self._lock:
            slots = [self._slot_of.get(request.state.request_id, END_OF_ROWS) for request in requests_with_new_token]
        return torch.tensor([*slots, END_OF_ROWS], dtype=torch.int32)

    def __call__(self, scores: torch.Tensor, tensor_arg: torch.Tensor) -> torch.Tensor:
        slots = tensor_arg[: scores.size(0)].tolist()
        chosen = torch.full_like(scores, float("-inf"))
        for row, slot in enumerate(slots):
            with self._lock:
                sampling = self._slots.get(slot)
            if sampling is None:
                chosen[row] = scores[row]  # unknown or padding row: the manager's greedy pick
                continue
            token = self._draw(scores[row], sampling)
            chosen[row, token] = 0.0
        return chosen

    def _draw(self, logits: torch.Tensor, sampling: RequestSampling) -> int:
        settings = sampling.settings
        raw = torch.log_softmax(logits, dim=-1)
        scores = logits.clone()
        if settings.repetition_penalty != 1.0 and sampling.history:
            seen = torch.tensor(sorted(set(sampling.history)), dtype=torch.long, device=scores.device)
            values = scores[seen]
            penalty = settings.repetition_penalty
            scores[seen] = torch.where(values > 0, values / penalty, values * penalty)
        if (settings.presence_penalty or settings.frequency_penalty) and sampling.records:
            counts = Counter(record.token for record in sampling.records)
            tokens = torch.tensor(list(counts), dtype=torch.long, device=scores.device)
            occurrences = torch.tensor(list(counts.values()), dtype=scores.dtype, device=scores.device)
            scores[tokens] -= settings.frequency_penalty * occurrences + settings.presence_penalty
        if sampling.enders is not None and len(sampling.records) < settings.min_tokens:
            scores[sampling.enders] = float("-inf")
        if sampling.guide is not None:
            scores = sampling.guide.mask(scores)
        if settings.temperature == 0:
            token = int(torch.argmax(scores))
        else:
            token = self._sample(scores / settings.temperature, settings, sampling.generator)
        top: dict[int, float] = {}
        if settings.logprobs:
            values, indices = torch.topk(raw, min(settings.logprobs, raw.numel()))
            top = dict(zip(indices.tolist(), values.tolist(), strict=True))
        sampling.records.append(TokenRecord(token, float(raw[token]), top))
        sampling.history.append(token)
        if sampling.guide is not None:
            sampling.guide.advance(token)
        return token

    @staticmethod
    def _sample(scores: torch.Tensor, settings: SamplingSettings, generator: torch.Generator) -> int:
        if 0 < settings.top_k < scores.numel():
            kth = torch.topk(scores, settings.top_k).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if settings.min_p > 0:
            probs = probs.masked_fill(probs < settings.min_p * probs.max(), 0.0)
        if settings.top_p < 1.0:
            ordered, order = torch.sort(probs, descending=True)
            before = torch.cumsum(ordered, dim=-1) - ordered  # mass of the tokens ranked above each one
            ordered = ordered.masked_fill(before >= settings.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(0, order, ordered)
        return int(torch.multinomial(probs / probs.sum(), 1, generator=generator))


class SamplerProcessors(ContinuousBatchingLogitsProcessorList):
    """The manager's processor list holding only a :class:`RequestSampler` (one int32 argument per row)."""

    def __init__(self, sampler: RequestSampler) -> None:
        super().__init__(LogitsProcessorList([sampler]), per_request_processors=False)
        self.tensors_required = 1
        self.do_processing = True
