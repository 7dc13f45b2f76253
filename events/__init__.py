"""The wire contract: commands, domain events, their envelope and the fairness of deals.

Every client and service shares it; the engine never imports it.  The main names are
re-exported here; ``docs/events.md`` describes the contract and which module holds what.
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
