"""Query parameters the REST API refuses: a 400 that names the parameter and says what is
wrong with it, answered before any broker is asked (never a broker error, never a 500)."""

from __future__ import annotations

import pytest
from django.test import Client

from .conftest import Servers

pytestmark = pytest.mark.django_db

C = "/api/clusters/default/"

# (path and query, the parameter the answer must name)
BAD = [
    ("topics/?page=x", "page"),
    ("topics/?page_size=many", "page_size"),
    ("topics/?type=WEIRD", "type"),
    ("topics/TBW102/offset-by-time/", "timestamp"),
    ("topics/TBW102/offset-by-time/?timestamp=soon", "timestamp"),
    ("groups/?sort=bogus", "sort"),
    ("groups/?system=perhaps", "system"),
    ("groups/?page=two", "page"),
    ("producers/some-producers/?topic=no%20spaces", "topic"),
    ("topics/TBW102/browse/?limit=lots", "limit"),
    ("topics/TBW102/browse/?begin=yesterday", "begin"),
    ("messages/by-key/?topic=TBW102", "key"),
    ("messages/by-key/?topic=TBW102&key=k&begin=early", "begin"),
    ("groups/some-group/dlq/?kind=graveyard", "kind"),
    ("groups/some-group/dlq/?page=first", "page"),
    ("groups/some-group/dlq/export/?format=xml", "format"),
    ("alerts/?state=maybe", "state"),
]


@pytest.mark.parametrize(("url", "name"), BAD)
def test_a_bad_query_parameter_is_a_400_naming_it(
    on_servers: Servers, personas: dict[str, Client], url: str, name: str
) -> None:
    response = personas["admin"].get(C + url)
    body = response.json()
    assert response.status_code == 400, (url, body)
    assert body["error"] == "invalid" and name in body["fields"], body
    assert f"{name}: " in body["detail"], body


def test_a_bad_query_parameter_is_refused_even_when_no_broker_answers(
    personas: dict[str, Client], settings: object
) -> None:
    """Validation comes first: the answer is the 400, not the unreachable broker's 503."""
    settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": "127.0.0.1:1"}  # type: ignore[attr-defined]
    assert personas["viewer"].get(C + "topics/?type=WEIRD").status_code == 400
    assert personas["viewer"].get(C + "groups/?sort=bogus").status_code == 400


def test_good_query_parameters_still_read_as_before(on_servers: Servers, personas: dict[str, Client]) -> None:
    viewer = personas["viewer"]
    assert viewer.get(C + "topics/?type=all&page_size=0").json()["pageSize"] == 1  # brought within range
    assert viewer.get(C + "topics/?type=nOrMaL,fifo&search=").status_code == 200
    assert viewer.get(C + "groups/?system=1&sort=-lag").status_code == 200
    assert viewer.get(C + "groups/?system=true&page=0").json()["page"] == 1
    assert viewer.get(C + "topics/TBW102/browse/?limit=&begin=&end=").status_code == 200
