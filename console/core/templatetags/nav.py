"""``{% nav_link url label %}``: a navigation link that says when it is the page you are on.

The link whose URL is the longest prefix of the request's path is marked
``aria-current="page"`` (which the stylesheet underlines): the Topics link stays marked on a
topic's page, the cluster's dashboard only on the dashboard itself.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html

register = template.Library()


@register.simple_tag(takes_context=True)
def nav_link(context: Any, url: str, label: str, exact: bool = False) -> str:
    """An ``<a>`` to ``url``; current when the path is ``url`` (or below it, unless ``exact``)."""
    request = context.get("request")
    path = request.path if request is not None else ""
    if path == url or (not exact and url != "/" and path.startswith(url)):
        return format_html('<a href="{}" aria-current="page">{}</a>', url, label)
    return format_html('<a href="{}">{}</a>', url, label)
