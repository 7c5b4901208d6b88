"""ASGI entry point: HTTP to Django, WebSockets to Channels consumers.

Daphne serves ``studio.asgi:application``. WebSockets need an allowed ``Origin``
(``ALLOWED_HOSTS``) and carry the Django session (``AuthMiddlewareStack``).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

# Set up Django before anything imports models (routing -> consumers -> auth).
django_http = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from studio.observability.asgi import CountConnections  # noqa: E402
from studio.routing import websocket_urlpatterns  # noqa: E402

http_app = ASGIStaticFilesHandler(django_http) if settings.SERVE_STATIC else django_http

if settings.STUDIO_EMBEDDED_WORKER:
    # Embedded mode: one worker thread in the web process runs queued runs.
    from studio.services.worker import start_embedded_worker

    start_embedded_worker()

application = ProtocolTypeRouter(
    {
        "http": CountConnections(http_app),  # SSE streams (studio_open_connections)
        "websocket": CountConnections(
            AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            )
        ),
    }
)
