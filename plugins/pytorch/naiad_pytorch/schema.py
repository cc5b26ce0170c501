"""What a TorchScript ``forward`` takes and returns, as plain data (no torch import).

:func:`naiad_pytorch.torchscript.schema_of` builds a :class:`ForwardSchema` from a loaded
module; :mod:`naiad_pytorch.binding` matches it against the model config.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    """The TorchScript types the backend can feed or read."""

    TENSOR = "Tensor"
    OPTIONAL_TENSOR = "Optional[Tensor]"
    STRING_LIST = "List[str]"
    TENSOR_LIST = "List[Tensor]"
    TENSOR_DICT = "Dict[str, Tensor]"
    TUPLE = "Tuple"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class ForwardArg:
    """One argument of ``forward`` (``self`` excluded)."""

    name: str
    kind: Kind
    type_name: str
    has_default: bool


@dataclass(frozen=True, slots=True)
class ForwardReturn:
    """What ``forward`` returns; ``elements`` lists the kinds of a tuple's items."""

    kind: Kind
    type_name: str
    elements: tuple[Kind, ...] = ()

    @property
    def count(self) -> int | None:
        """How many positional outputs the model produces, when the type says so."""
        if self.kind is Kind.TUPLE:
            return len(self.elements)
        if self.kind in (Kind.TENSOR, Kind.STRING_LIST):
            return 1
        return None

    def element_kind(self, index: int) -> Kind:
        """The kind of positional output ``index`` (``TENSOR`` for items of a ``List[Tensor]``)."""
        if self.kind is Kind.TUPLE:
            return self.elements[index]
        if self.kind is Kind.TENSOR_LIST:
            return Kind.TENSOR
        return self.kind


@dataclass(frozen=True, slots=True)
class ForwardSchema:
    """``forward``'s arguments and return type."""

    args: tuple[ForwardArg, ...]
    returns: ForwardReturn

    @property
    def arg_names(self) -> list[str]:
        return [arg.name for arg in self.args]

    def describe(self) -> str:
        """``forward(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]`` for messages."""
        args = ", ".join(f"{arg.name}: {arg.type_name}" for arg in self.args)
        return f"forward({args}) -> {self.returns.type_name}"
