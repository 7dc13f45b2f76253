"""The gateway: HTTP and WebSocket in front of the command streams, the store and the views.

``create_app(settings)`` returns the FastAPI app; ``python -m services.gateway`` serves it.
``docs/api.md`` describes the API, ``docs/asyncapi.json`` the streams and socket messages.
"""

from services.gateway.app import create_app

__all__ = ["create_app"]
