"""``{% nav_link url label %}``: a navigation link that says when it is the page you are on.

The link whose URL is the longest prefix of the request's path is marked
``aria-current="page"`` (which the stylesheet underlines): the Topics link stays marked on a
topic's page, the cluster's dashboard only on the dashboard itself.  A page whose path is
under no link (a task's page) names the link it belongs to as ``nav_current`` in its context.

``{% nav_cluster as c %}``: the cluster whose menu the page shows — the page's own cluster,
else the one the user last opened (pages outside a cluster keep the menu).
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html

from console.core.pages import current_cluster
from nameserver.clusters import ClusterRef

register = template.Library()


@register.simple_tag(takes_context=True)
def nav_link(context: Any, url: str, label: str, exact: bool = False) -> str:
    """An ``<a>`` to ``url``; current when the path is ``url`` (or below it, unless ``exact``)."""
    request = context.get("request")
    path = request.path if request is not None else ""
    named = context.get("nav_current")
    if named:
        current = url == named
    else:
        current = path == url or (not exact and url != "/" and path.startswith(url))
    if current:
        return format_html('<a href="{}" aria-current="page">{}</a>', url, label)
    return format_html('<a href="{}">{}</a>', url, label)


@register.simple_tag(takes_context=True)
def nav_cluster(context: Any) -> ClusterRef | None:
    """The page's cluster (``cluster`` or ``nav_cluster`` in its context), else the user's
    current one (last opened, or the first they may view); None when they may view none."""
    for name in ("cluster", "nav_cluster"):
        found = context.get(name)
        if isinstance(found, ClusterRef):
            return found
    return current_cluster(context.get("request"))
