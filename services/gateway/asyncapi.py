"""The AsyncAPI 3.0 document of the streams, the hint channels and the table WebSocket.

``python -m services.gateway.asyncapi docs/asyncapi.json`` writes it; ``--check`` exits 1 when
the file differs from what the code says (``tests/services/test_gateway.py`` runs that check).
The payload schemas are the pydantic JSON Schemas of ``events`` (commands, events, envelope)
and of ``services.gateway.messages`` (stream entries, hints, socket messages).  It is built by
hand rather than from a FastStream broker: the command streams are written by several services
and read by one, the hints are plain pub/sub, and the WebSocket is FastAPI's; no one FastStream
application holds all of them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from events.commands import MAX_COMMAND_BYTES, Command
from services.gateway.generated import write_or_check
from services.gateway.messages import (
    ClientCommand,
    CommandEntry,
    ErrorMessage,
    EventMessage,
    Hello,
    ResultHint,
    ResultMessage,
    ViewHint,
    ViewMessage,
)

VERSION = "1"


class _Schemas:
    """Collects JSON Schemas under ``components.schemas``; returns ``$ref``s to them."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def ref(self, name: str, adapter: TypeAdapter[Any]) -> dict[str, str]:
        schema = adapter.json_schema(ref_template="#/components/schemas/{model}")
        for def_name, definition in schema.pop("$defs", {}).items():
            self.schemas.setdefault(def_name, definition)
        self.schemas[name] = schema
        return {"$ref": f"#/components/schemas/{name}"}


def _message(name: str, title: str, summary: str, payload: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "title": title,
        "summary": summary,
        "contentType": "application/json",
        "payload": payload,
    }


def document() -> dict[str, Any]:
    """Return the AsyncAPI document (a JSON-ready dict, the same on every call)."""
    s = _Schemas()
    messages = {
        "CommandEntry": _message(
            "commandEntry",
            "Command stream entry",
            "Fields c (command JSON), s (seat) and r (received ms) of an XADD; the command in "
            f"c is an events.commands command of at most {MAX_COMMAND_BYTES} bytes "
            "(schema Command).",
            s.ref("CommandEntry", TypeAdapter(CommandEntry)),
        ),
        "ResultHint": _message(
            "resultHint",
            "Result hint",
            "A command's result, after the engine worker appended it; the store's record "
            "(cmdids) is authoritative. One message carries a batch's hints, one JSON object a "
            "line.",
            s.ref("ResultHint", TypeAdapter(ResultHint)),
        ),
        "ViewHint": _message(
            "viewHint",
            "View hint",
            "'<table_id> <version>' lines: each table's views are stored at that version "
            "(one message a batch of an engine worker, or a shard write of a projector).",
            s.ref("ViewHint", TypeAdapter(ViewHint)),
        ),
        "Hello": _message(
            "hello",
            "Hello",
            "First message on a socket: the seat, the table version, and whether it resumed.",
            s.ref("Hello", TypeAdapter(Hello)),
        ),
        "EventMessage": _message(
            "event",
            "Event",
            "One event the viewer may see, in version order, each exactly once.",
            s.ref("EventMessage", TypeAdapter(EventMessage)),
        ),
        "ViewMessage": _message(
            "view",
            "View",
            "The viewer's whole view (projector's read model), newer than the last one sent.",
            s.ref("ViewMessage", TypeAdapter(ViewMessage)),
        ),
        "ResultMessage": _message(
            "result",
            "Result",
            "The result of a command sent on this socket (as the HTTP answer).",
            s.ref("ResultMessage", TypeAdapter(ResultMessage)),
        ),
        "ErrorMessage": _message(
            "error",
            "Error",
            "Why the socket closes (4401 bad token, 4404 no table, 4008 too slow).",
            s.ref("ErrorMessage", TypeAdapter(ErrorMessage)),
        ),
        "ClientCommand": _message(
            "command",
            "Command",
            "A seat's command, sent by the client.",
            s.ref("ClientCommand", TypeAdapter(ClientCommand)),
        ),
    }

    def refs(*names: str) -> dict[str, Any]:
        return {n: {"$ref": f"#/components/messages/{n}"} for n in names}

    namespace = {
        "description": "The deployment's key prefix (CONQUIAN_NAMESPACE).",
        "default": "cq",
    }
    ws_messages = refs(
        "Hello", "EventMessage", "ViewMessage", "ResultMessage", "ErrorMessage", "ClientCommand"
    )
    channels: dict[str, Any] = {
        "commands": {
            "address": "{namespace}:{shardTag}:cmd",
            "title": "Command intake stream of a shard",
            "description": "A Redis stream per shard. The gateway, the bots runner and the turn "
            "clock XADD; the engine worker reads it in the consumer group 'engine'. A table's "
            "shard is crc32(table_id) % shards.",
            "parameters": {
                "namespace": namespace,
                "shardTag": {
                    "description": "The shard's hash tag, {sNN}: s followed by the shard "
                    "number in two digits (more from 100 shards on), in braces.",
                    "examples": ["{s07}"],
                },
            },
            "servers": [{"$ref": "#/servers/redis"}],
            "messages": refs("CommandEntry"),
        },
        "results": {
            "address": "{namespace}:results",
            "title": "Result hints",
            "description": "Redis pub/sub. The engine worker publishes after each batch; the "
            "gateway's one listener per process wakes the request waiting for the command.",
            "parameters": {"namespace": namespace},
            "servers": [{"$ref": "#/servers/redis"}],
            "messages": refs("ResultHint"),
        },
        "views": {
            "address": "{namespace}:views",
            "title": "View hints",
            "description": "Redis pub/sub. The engine worker publishes after each batch for "
            "the views its appends stored, the projector after each view write of its own; the "
            "gateway sends the new events and views to the table's sockets.",
            "parameters": {"namespace": namespace},
            "servers": [{"$ref": "#/servers/redis"}],
            "messages": refs("ViewHint"),
        },
        "tableSocket": {
            "address": "/tables/{table_id}/ws",
            "title": "A table's WebSocket",
            "description": "Query: token (a seat token; none for a spectator) and after (the "
            "last version the client saw: resume from it when the gap is at most the "
            "deployment's resume gap, else a full view first). The gateway sends hello, then "
            "the catch-up, then events and views live; a seat sends commands.",
            "parameters": {"table_id": {"description": "The table's id."}},
            "servers": [{"$ref": "#/servers/gateway"}],
            "messages": ws_messages,
            "bindings": {
                "ws": {
                    "method": "GET",
                    "query": {
                        "type": "object",
                        "properties": {
                            "token": {"type": "string", "description": "a seat token"},
                            "after": {"type": "integer", "minimum": 0},
                        },
                    },
                }
            },
        },
    }

    def op(action: str, channel: str, names: tuple[str, ...], summary: str) -> dict[str, Any]:
        return {
            "action": action,
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": summary,
            "messages": [{"$ref": f"#/channels/{channel}/messages/{n}"} for n in names],
        }

    operations = {
        "enqueueCommand": op(
            "send", "commands", ("CommandEntry",), "Gateway, bots runner, turn clock: XADD."
        ),
        "consumeCommands": op(
            "receive", "commands", ("CommandEntry",), "Engine worker: XREADGROUP 'engine'."
        ),
        "publishResult": op("send", "results", ("ResultHint",), "Engine worker: PUBLISH."),
        "awaitResult": op("receive", "results", ("ResultHint",), "Gateway: SUBSCRIBE."),
        "publishView": op("send", "views", ("ViewHint",), "Engine worker and projector: PUBLISH."),
        "followViews": op("receive", "views", ("ViewHint",), "Gateway: SUBSCRIBE."),
        "streamTable": op(
            "send",
            "tableSocket",
            ("Hello", "EventMessage", "ViewMessage", "ResultMessage", "ErrorMessage"),
            "Gateway → client.",
        ),
        "takeCommands": op("receive", "tableSocket", ("ClientCommand",), "Client → gateway."),
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Conquian streams",
            "version": VERSION,
            "description": "The command streams and hint channels between the Conquian "
            "services, and the table WebSocket of the gateway (docs/services.md, docs/api.md). "
            "Generated by `python -m services.gateway.asyncapi docs/asyncapi.json`.",
        },
        "defaultContentType": "application/json",
        "servers": {
            "redis": {
                "host": "localhost:6379",
                "protocol": "redis",
                "description": "The deployment's Redis (REDIS_URL).",
            },
            "gateway": {
                "host": "localhost:8000",
                "protocol": "ws",
                "description": "The gateway (python -m services.gateway).",
            },
        },
        "channels": channels,
        "operations": operations,
        "components": {
            "messages": messages,
            "schemas": {
                **s.schemas,
                "Command": TypeAdapter[Any](Command).json_schema(
                    ref_template="#/components/schemas/{model}"
                ),
            },
        },
    }


def render() -> str:
    """Return the document as JSON text (2-space indent, keys in a fixed order, final newline)."""
    return json.dumps(_without_defs(document()), indent=2, ensure_ascii=False) + "\n"


def _without_defs(doc: dict[str, Any]) -> dict[str, Any]:
    schemas = doc["components"]["schemas"]
    command = schemas["Command"]
    for name, definition in command.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    doc["components"]["schemas"] = dict(sorted(schemas.items()))
    return doc


def main(argv: list[str] | None = None) -> int:
    """Write the document to the path given (``--check``: compare instead)."""
    parser = argparse.ArgumentParser(prog="python -m services.gateway.asyncapi")
    parser.add_argument("path", type=Path, help="where the document goes (docs/asyncapi.json)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    return write_or_check(args.path, render(), args.check)


if __name__ == "__main__":
    sys.exit(main())
