"""Errors and empty states are sentences a person understands, with the next step, in the
browser: a group that never dead-lettered, a topic or group the cluster does not have, a
topic name the rules refuse (the browser's own check, then the server's)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Console

pytestmark = pytest.mark.slow
C = "/clusters/default"
INTERNALS = ("TOPIC_NOT_EXIST", "ErrorDetail", "refused", "Traceback", "SUBSCRIPTION_GROUP_NOT_EXIST")


def no_internals(page: Any) -> None:
    text = page.locator("main").inner_text()
    assert not [word for word in INTERNALS if word in text], text


def test_a_group_that_never_dead_lettered_says_so(console: Console, page: Any) -> None:
    console.api("POST", "/api/clusters/default/groups/", {"name": "calm-group"})
    page.goto(console.url + C + "/groups/calm-group/dlq/")
    assert (
        "No dead letters: calm-group has never given up on a message"
        in page.locator("#dlq-empty").inner_text()
    )
    assert page.locator("p.error").count() == 0
    no_internals(page)


def test_a_topic_or_group_the_cluster_does_not_have_is_said_in_words(console: Console, page: Any) -> None:
    answer = page.goto(console.url + C + "/topics/NoSuchTopic/")
    assert answer is not None and answer.status == 404
    assert "There is no topic 'NoSuchTopic' in this cluster" in page.locator("p.error").inner_text()
    no_internals(page)
    answer = page.goto(console.url + C + "/groups/no-such-group/")
    assert answer is not None and answer.status == 404
    assert (
        "There is no consumer group 'no-such-group' in this cluster" in page.locator("p.error").inner_text()
    )
    # Nothing to act on: no reset, config or delete form for a group that is not there.
    assert page.locator("#reset-form, #delete-group, form[action$='/config/']").count() == 0
    no_internals(page)


def test_a_topic_name_with_a_space_is_refused_with_the_rule(console: Console, page: Any) -> None:
    page.goto(console.url + C + "/topics/")
    page.click("text=Create a topic")
    rule = page.locator("#topic-name-rule").inner_text()
    assert "letters" in rule.lower()  # the allowed characters are stated beside the box
    name = page.locator("#create-topic input[name=name]")
    name.fill("bad name")
    page.click("#create-topic button[type=submit]")
    # The browser's own check (the pattern compiles in Chromium) stops the form.
    assert name.evaluate("el => el.validity.patternMismatch") is True
    assert page.url.endswith("/topics/")
    # Past the browser (a script, an old browser), the server says the same in words.
    page.evaluate("document.getElementById('create-topic').noValidate = true")
    page.click("#create-topic button[type=submit]")
    page.wait_for_load_state()
    error = page.locator("p.error").inner_text()
    assert "'bad name' was not created" in error and "ErrorDetail" not in error
    no_internals(page)
