"""Sign-in for the pages and the API, throttled: repeated failures for one account from one
address are refused for a while (HTTP 429), so passwords cannot be guessed at speed."""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request
from rest_framework.response import Response

MAX_FAILURES = 5
WINDOW_SECONDS = 300


def _key(request: HttpRequest, username: str) -> str:
    """One counter per address and account (hashed: a user name may hold any character)."""
    who = f"{request.META.get('REMOTE_ADDR', '')}\0{username.lower()}".encode("utf-8", "replace")
    return "quiver:login-failures:" + hashlib.sha256(who).hexdigest()


def locked_out(request: HttpRequest, username: str) -> bool:
    return int(cache.get(_key(request, username), 0)) >= MAX_FAILURES


def note_failure(request: HttpRequest, username: str) -> None:
    key = _key(request, username)
    cache.add(key, 0, WINDOW_SECONDS)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, WINDOW_SECONDS)


def clear_failures(request: HttpRequest, username: str) -> None:
    cache.delete(_key(request, username))


LOCKED_OUT = f"too many failed sign-ins: try again in {WINDOW_SECONDS // 60} minutes"


class ThrottledLoginView(LoginView):
    """Django's login page, refusing an account after repeated failures from one address."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")
        if locked_out(request, username):
            form = self.get_form()
            form.add_error(None, LOCKED_OUT)
            return self.render_to_response(self.get_context_data(form=form), status=429)
        response = super().post(request, *args, **kwargs)
        if request.user.is_authenticated:
            clear_failures(request, username)
        else:
            note_failure(request, username)
        return response


class ThrottledTokenView(ObtainAuthToken):
    """POST username and password, get the API token (``Authorization: Token <key>``)."""

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        username = str(request.data.get("username", ""))
        if locked_out(request._request, username):
            return Response({"error": "throttled", "detail": LOCKED_OUT}, status=429)
        try:
            response = super().post(request, *args, **kwargs)
        except Exception:
            note_failure(request._request, username)
            raise
        clear_failures(request._request, username)
        return response
