"""WebSocket addresses (the HTTP ones are in ``studio.urls``)."""

from __future__ import annotations

from django.urls import path, re_path

from studio.consumers import NoSuchSocket, ThreadConsumer
from studio.reviews.consumers import ReviewsConsumer

websocket_urlpatterns = [
    path("ws/threads/<str:thread_id>/", ThreadConsumer.as_asgi(), name="ws-thread"),
    path("ws/reviews/", ReviewsConsumer.as_asgi(), name="ws-reviews"),
    re_path(r"", NoSuchSocket.as_asgi()),  # last: every other address
]
