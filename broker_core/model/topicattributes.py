"""Topic attributes (RocketMQ 5 ``TopicAttributes``, ``AttributeParser``, ``AttributeUtil``):
the ``key: value`` pairs a topic config carries besides its queue counts, and how a request
changes them.

Quiver knows one attribute, ``message.type``: the kind of message the topic takes
(``broker_core.model.messagetype``; NORMAL when absent).  RocketMQ's others (``queue.type``,
``cleanup.policy``, ``reserve.time``) steer storage features Quiver does not have: a change
naming them is refused, though a config file written by a Java broker keeps them as they are.

Changes travel as RocketMQ's string, comma-separated: ``+key=value`` sets a key, ``-key``
removes one (``"+message.type=FIFO"``).  UPDATE_AND_CREATE_TOPIC carries it in its
``attributes`` field, mqadmin's ``updateTopic`` takes it as ``-a``.  The broker applies it to
what the topic has, as RocketMQ does:

- a topic being created may only be given keys (``+``);
- removing a key the topic does not have, or naming a key twice, is refused;
- an attribute that is not ``changeable`` may only be given at creation (``message.type``
  may change at any time);
- a value outside the attribute's set is refused;
- an update that names no attribute keeps the topic's attributes.

Parsed changes are a mapping of key to value, ``None`` meaning "remove".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from broker_core.model.messagetype import DEFAULT_MESSAGE_TYPE, MESSAGE_TYPES

MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"
# RocketMQ's other topic attributes, named so a refusal can say why.
UNSUPPORTED_ROCKETMQ_ATTRIBUTES: Final = frozenset({"queue.type", "cleanup.policy", "reserve.time"})

ADD_SIGN: Final = "+"
DELETE_SIGN: Final = "-"
SEPARATOR: Final = ","
EQUAL_SIGN: Final = "="

AttributeChanges = dict[str, str | None]
"""Parsed changes in their order: key -> new value, or None to remove the key."""


class TopicAttributeError(ValueError):
    """An attribute change that is malformed or not allowed; the message says which and why."""


@dataclass(frozen=True, slots=True)
class EnumAttribute:
    """An attribute whose value is one of a fixed set (RocketMQ ``EnumAttribute``)."""

    name: str
    changeable: bool
    values: tuple[str, ...]
    default: str

    def problem(self, value: str) -> str | None:
        """Why ``value`` may not be this attribute's, or None."""
        if value in self.values:
            return None
        return f"value is not in set: {self.name} must be one of {', '.join(self.values)}, not {value!r}"


MESSAGE_TYPE: Final = EnumAttribute(MESSAGE_TYPE_ATTRIBUTE, True, MESSAGE_TYPES, DEFAULT_MESSAGE_TYPE)

# Every attribute a change may name.
ATTRIBUTES: Final[Mapping[str, EnumAttribute]] = {MESSAGE_TYPE.name: MESSAGE_TYPE}


def attribute_problem(key: str, value: str) -> str | None:
    """Why a topic may not hold ``key = value``, or None (unknown keys are not judged: a
    stored config may hold RocketMQ attributes Quiver leaves alone)."""
    attribute = ATTRIBUTES.get(key)
    return None if attribute is None else attribute.problem(value)


def parse_attribute_changes(text: str) -> AttributeChanges:
    """``"+k1=v1,+k2=v2,-k3"`` -> ``{"k1": "v1", "k2": "v2", "k3": None}`` (empty text: none).

    Checks the form only (signs, ``=``, non-empty names and values, no key twice); what
    the keys and values may be is ``alter_attributes``' to judge.

    Raises:
        TopicAttributeError: naming the item that is malformed.
    """
    changes: AttributeChanges = {}
    for raw in text.split(SEPARATOR):
        item = raw.strip()
        if not item:
            continue
        if EQUAL_SIGN in item:
            signed, _, value = item.partition(EQUAL_SIGN)
            if not signed.startswith(ADD_SIGN):
                raise TopicAttributeError(
                    f"add/alter attribute format is wrong: {item!r} (set a key with +key=value)"
                )
            if not value or EQUAL_SIGN in value:
                raise TopicAttributeError(
                    f"add/alter attribute format is wrong: {item!r} (one value after one '=')"
                )
            key: str = signed[1:]
            new: str | None = value
        else:
            if not item.startswith(DELETE_SIGN):
                raise TopicAttributeError(
                    f"delete attribute format is wrong: {item!r} (remove a key with -key)"
                )
            key, new = item[1:], None
        if not key or ADD_SIGN in key or DELETE_SIGN in key:
            raise TopicAttributeError(f"kv string format wrong: {item!r}")
        if key in changes:
            raise TopicAttributeError(f"alter duplication key. key: {key}")
        changes[key] = new
    return changes


def format_attribute_changes(changes: Mapping[str, str | None]) -> str:
    """The wire form of ``changes``: ``"+k1=v1,-k3"`` (empty when there are none)."""
    return SEPARATOR.join(
        f"{DELETE_SIGN}{key}" if value is None else f"{ADD_SIGN}{key}{EQUAL_SIGN}{value}"
        for key, value in changes.items()
    )


def alter_attributes(
    current: Mapping[str, str], changes: Mapping[str, str | None], *, create: bool
) -> dict[str, str]:
    """The attributes a topic has after ``changes``: ``current`` (those it has; empty for a
    topic being created) with the keys set and removed (RocketMQ
    ``AttributeUtil.alterCurrentAttributes``).

    Raises:
        TopicAttributeError: naming the first change that may not be made, and why.
    """
    result = dict(current)
    for key, value in changes.items():
        if create and value is None:
            raise TopicAttributeError(f"only add attribute is supported while creating topic. key: {key}")
        attribute = ATTRIBUTES.get(key)
        if attribute is None:
            rocketmq_only = key in UNSUPPORTED_ROCKETMQ_ATTRIBUTES
            why = " (a RocketMQ storage attribute Quiver does not have)" if rocketmq_only else ""
            known = ", ".join(sorted(ATTRIBUTES))
            raise TopicAttributeError(f"unsupported key: {key}{why}; Quiver's topic attributes: {known}")
        if not create and not attribute.changeable:
            raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {key}")
        if value is None:
            if key not in current:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {key}")
            del result[key]
            continue
        problem = attribute.problem(value)
        if problem is not None:
            raise TopicAttributeError(problem)
        result[key] = value
    return result
