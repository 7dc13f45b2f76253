"""The wire contract: commands, domain events, their envelope and the fairness of deals.

Every client and service shares it; the engine never imports it.  ``docs/events.md`` describes
the contract; the main names are re-exported here:

* commands (client → service): :data:`Command`, :func:`parse_command` (``events.commands``);
* domain events: :data:`DomainEvent`, :data:`TableEvent` (``events.domain``), read with
  upcasting by :func:`parse_event` (``events.upcast``);
* the envelope and its hash chain: :class:`Envelope`, :func:`seal` (``events.envelope``,
  ``events.chain``);
* engine values both ways: :func:`to_wire`, :func:`to_engine`, :func:`to_engine_command`
  (``events.mapping``);
* errors with stable codes: :class:`ContractError` and its subclasses (``events.base``).
"""

from events.base import (
    ContractError,
    InvalidContent,
    MalformedJson,
    TooLarge,
    UnknownType,
    UnknownVersion,
)
from events.commands import MAX_COMMAND_BYTES, Command, parse_command
from events.domain import EVENT_TYPES, DomainEvent, TableEvent
from events.envelope import Envelope, HashMismatch, seal
from events.mapping import rejection, to_engine, to_engine_command, to_wire
from events.upcast import parse_event

__all__ = [
    "EVENT_TYPES",
    "MAX_COMMAND_BYTES",
    "Command",
    "ContractError",
    "DomainEvent",
    "Envelope",
    "HashMismatch",
    "InvalidContent",
    "MalformedJson",
    "TableEvent",
    "TooLarge",
    "UnknownType",
    "UnknownVersion",
    "parse_command",
    "parse_event",
    "rejection",
    "seal",
    "to_engine",
    "to_engine_command",
    "to_wire",
]
