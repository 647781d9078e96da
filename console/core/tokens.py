"""The API-token page: a signed-in user creates, sees once, replaces and revokes the token
that authenticates their REST calls (``Authorization: Token <key>``), without the API.

One token per user (DRF's ``authtoken``): creating one replaces any earlier one, which
stops working at once. Each change is audited; the key itself is never recorded.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from console.audit.services import audited


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """GET: whether the user has a token and since when; POST ``action=create|revoke``."""
    new_key = ""
    message = ""
    status = 200
    if request.method == "POST":
        action = request.POST.get("action")
        user = request.user.get_username()
        if action == "create":
            with audited(request, "token.create", target=user):
                Token.objects.filter(user=request.user).delete()
                new_key = Token.objects.create(user=request.user).key
            message = "Your new token is below. Copy it now: it is not shown again."
        elif action == "revoke":
            with audited(request, "token.revoke", target=user):
                gone, _ = Token.objects.filter(user=request.user).delete()
            message = (
                "Your token is revoked: calls made with it are refused from now on."
                if gone
                else "You had no token to revoke."
            )
        else:
            message, status = "Choose to create or to revoke a token.", 400
    current = Token.objects.filter(user=request.user).first()
    context = {"token": current, "new_key": new_key, "message": message, "failed": status != 200}
    return render(request, "core/tokens.html", context, status=status)
