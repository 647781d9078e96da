"""What every console write action shares, whichever surface asks (a page's form or the API).

A write action is one function in its app's ``services.py`` (``create_topic(actor, cluster,
spec)``, ``reset_offsets(...)``): it checks the actor's right on the cluster, acts on the
brokers and writes the audit row, so a permission or audit rule is fixed in one place and
both surfaces agree.  The page and API views only parse, call and respond: a failure is an
exception (``AdminError`` from the brokers, ``TimeoutError`` when they are slow,
``PermissionDenied``, ``NotConfirmed``), which the API turns into an HTTP answer
and a page into a message in words (both in ``console.core.api_errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST
from rest_framework.request import Request

from broker_core.errors import AdminError
from console.core.access import allowed
from console.core.api_errors import failure_words
from console.core.pages import cluster_for
from nameserver.clusters import ClusterRef

T = TypeVar("T")

# Who asks: the request of the page or the API call.  Its user is checked and named in the
# audit row, its address recorded there.
Actor: TypeAlias = HttpRequest | Request


def require(actor: Actor, cluster: ClusterRef, need: str) -> None:
    """Refuse (PermissionDenied: a 403 on either surface) unless the actor may ``need``
    (view, operate, admin, export) on ``cluster``."""
    if not allowed(actor.user, cluster.name, need):
        raise PermissionDenied(f"your role on {cluster.name} does not allow this")


class NotConfirmed(Exception):
    """A destructive action was asked without naming its target again (``confirm``): nothing
    was done and no audit row written; the caller shows the impact and asks again."""


def form_problems(form: Any) -> str:
    """A refused form's errors in one line for a page: each field and what is wrong with it."""
    return "; ".join(f"{field}: {' '.join(map(str, errs))}" for field, errs in form.errors.items())


def attempt(request: HttpRequest, what: str, action: Callable[[], T]) -> T | None:
    """Run a page's ``action``: its result, or None once the page has been told why it did
    not happen (``not <what>: ...``, a message shown on the next page)."""
    try:
        return action()
    except NotConfirmed as exc:
        flash.error(request, f"not {what}: {exc}")
    except (AdminError, TimeoutError) as exc:
        flash.error(request, f"not {what}: {failure_words(exc)}")
    return None


def confirmed_delete_page(
    kind: str, delete: Callable[[Actor, ClusterRef, str, str], object]
) -> Callable[..., HttpResponse]:
    """The page view (POST, admins) that deletes one ``kind`` (``topic``, ``group``: the URL
    argument and the ``<kind>s:`` URL names) with ``delete(actor, cluster, name, confirm)``,
    after the impact its page shows, confirmed by typing its name: back to the list when it
    is gone, to its page with the reason when not."""

    @login_required
    @require_POST
    def view(request: HttpRequest, cluster: str, **names: str) -> HttpResponse:
        name = names[kind]
        ref = cluster_for(request, cluster, "admin")
        confirm = request.POST.get("confirm", "")
        if attempt(request, "deleted", lambda: delete(request, ref, name, confirm)) is None:
            return redirect(f"{kind}s:detail", cluster=cluster, **{kind: name})
        flash.success(request, f"deleted {name}")
        return redirect(f"{kind}s:list", cluster=cluster)

    view.__doc__ = f"Delete a {kind} after its impact check, confirmed by typing its name (admins)."
    return view
