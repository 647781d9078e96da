"""Validate the cluster list, broker-config changes and ACL accounts sent to the API."""

from __future__ import annotations

from rest_framework import serializers

from console.clusters.replication import STATES
from nameserver.models import Cluster


class ClusterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = ["name", "namesrv_addr", "description", "created"]
        read_only_fields = ["created"]


class BrokerConfigChange(serializers.Serializer):
    """``{"changes": {"key": "value", ...}}``: RocketMQ key names, values as text."""

    changes = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=1000), allow_empty=False
    )


PERM = serializers.ChoiceField(choices=["DENY", "PUB", "SUB", "PUB|SUB"], required=False)


class AclAccount(serializers.Serializer):
    """A plain_acl.yml account, as RocketMQ names its fields."""

    accessKey = serializers.RegexField(r"^[A-Za-z0-9_.@-]{3,64}$")  # noqa: N815
    secretKey = serializers.CharField(min_length=6, max_length=128, required=False)  # noqa: N815
    whiteRemoteAddress = serializers.CharField(max_length=512, required=False, allow_blank=True)  # noqa: N815
    admin = serializers.BooleanField(required=False)
    defaultTopicPerm = PERM  # noqa: N815
    defaultGroupPerm = PERM  # noqa: N815
    topicPerms = serializers.ListField(
        child=serializers.RegexField(r"^[%|A-Za-z0-9_-]+=(DENY|PUB|SUB|PUB\|SUB)$"), required=False
    )  # noqa: N815
    groupPerms = serializers.ListField(
        child=serializers.RegexField(r"^[%|A-Za-z0-9_-]+=(DENY|PUB|SUB|PUB\|SUB)$"), required=False
    )  # noqa: N815


class WhiteList(serializers.Serializer):
    addresses = serializers.ListField(
        child=serializers.RegexField(r"^[0-9A-Fa-f.:*{},-]+$"), allow_empty=True
    )


# What the cluster endpoints answer (declared for the OpenAPI document; ``services``,
# ``traffic`` and ``nameserver.topology`` build it).


class ClusterRowOut(serializers.Serializer):
    """A cluster you may see: its name, nameservers and your role on it (null: none, e.g.
    a staff user without a grant)."""

    name = serializers.CharField()
    namesrvAddr = serializers.CharField()  # noqa: N815
    role = serializers.CharField(allow_null=True)


class ClusterListOut(serializers.Serializer):
    """The clusters you may see."""

    clusters = ClusterRowOut(many=True)


class ClusterOut(serializers.Serializer):
    """A configured cluster (``services.cluster_fields``: the model's field names)."""

    name = serializers.CharField()
    namesrv_addr = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    created = serializers.DateTimeField()


class ClusterNotFoundOut(serializers.Serializer):
    """No such configured cluster, or not one you may see (404)."""

    error = serializers.CharField()
    detail = serializers.CharField()


class BrokerRowOut(serializers.Serializer):
    """One broker (``nameserver.topology.broker_rows``): where it is, its role and version,
    TPS in/out, messages put/got today, disk use, boot time (epoch ms), uptime, topic count
    and last heartbeat (epoch ms); figures null with ``error`` set when it did not answer."""

    cluster = serializers.CharField()
    brokerName = serializers.CharField()  # noqa: N815
    brokerId = serializers.IntegerField()  # noqa: N815
    addr = serializers.CharField()
    role = serializers.ChoiceField(choices=["master", "slave"])
    version = serializers.CharField(allow_null=True)
    putTps = serializers.FloatField(allow_null=True)  # noqa: N815
    getTps = serializers.FloatField(allow_null=True)  # noqa: N815
    putToday = serializers.IntegerField(allow_null=True)  # noqa: N815
    getToday = serializers.IntegerField(allow_null=True)  # noqa: N815
    diskUsedPercent = serializers.FloatField(allow_null=True)  # noqa: N815
    bootTimestamp = serializers.IntegerField(allow_null=True)  # noqa: N815
    uptime = serializers.CharField(allow_null=True)
    topicCount = serializers.IntegerField(allow_null=True)  # noqa: N815
    lastHeartbeat = serializers.IntegerField(allow_null=True)  # noqa: N815
    error = serializers.CharField(allow_null=True)


class BrokerListOut(serializers.Serializer):
    """Every broker of the cluster, and the addresses of those that did not answer."""

    cluster = serializers.CharField()
    brokers = BrokerRowOut(many=True)
    unreadable = serializers.ListField(child=serializers.CharField())


class BrokerConfigOut(serializers.Serializer):
    """A broker's running settings by RocketMQ key name, values as text."""

    broker = serializers.CharField()
    config = serializers.DictField(child=serializers.CharField(allow_blank=True))


class HealthCheckOut(serializers.Serializer):
    """One check: its name, whether it passed, and what failed (blank when it passed)."""

    check = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField(allow_blank=True)


class HealthOut(serializers.Serializer):
    """The cluster's health checks; ``ok`` when every one passed."""

    cluster = serializers.CharField()
    ok = serializers.BooleanField()
    checks = HealthCheckOut(many=True)


class DelayLevelOut(serializers.Serializer):
    """One delay level: its delay, the messages waiting and when the next is due (epoch ms;
    null: none waiting)."""

    level = serializers.IntegerField()
    delayMs = serializers.IntegerField()  # noqa: N815
    waiting = serializers.IntegerField()
    nextDueMs = serializers.IntegerField(allow_null=True)  # noqa: N815


class HalfMessageOut(serializers.Serializer):
    """A transactional half message not yet committed or rolled back: its ids, real topic,
    producer group, when it was stored, its age and the check-backs sent."""

    queueOffset = serializers.IntegerField()  # noqa: N815
    msgId = serializers.CharField()  # noqa: N815
    uniqKey = serializers.CharField(allow_null=True)  # noqa: N815
    topic = serializers.CharField()
    producerGroup = serializers.CharField(allow_blank=True)  # noqa: N815
    storeTimestamp = serializers.IntegerField()  # noqa: N815
    ageMs = serializers.IntegerField()  # noqa: N815
    checkBacks = serializers.IntegerField()  # noqa: N815


class TimersOut(serializers.Serializer):
    """Timer messages (any delivery time, RocketMQ 5) waiting on a broker, and the next due
    time among those its timer has read (null when none)."""

    waiting = serializers.IntegerField()
    nextDueMs = serializers.IntegerField(allow_null=True)  # noqa: N815


class ScheduleBrokerOut(serializers.Serializer):
    """One master's schedule (``services.schedule_rows``): the delay levels' backlog, the
    timer messages waiting, and the pending half messages (at most 1000 listed,
    ``pendingHalfMessages`` counts them all) as of the broker's clock; only ``brokerName``,
    ``addr`` and ``error`` when it did not answer."""

    brokerName = serializers.CharField()  # noqa: N815
    addr = serializers.CharField()
    error = serializers.CharField(allow_null=True)
    timestampMs = serializers.IntegerField(required=False)  # noqa: N815
    delayLevels = DelayLevelOut(many=True, required=False)  # noqa: N815
    timers = TimersOut(required=False)
    halfMessages = HalfMessageOut(many=True, required=False)  # noqa: N815
    pendingHalfMessages = serializers.IntegerField(required=False)  # noqa: N815


class ScheduleOut(serializers.Serializer):
    """Delayed messages waiting per level, timer messages waiting, and pending half
    messages, per master."""

    cluster = serializers.CharField()
    brokers = ScheduleBrokerOut(many=True)


class AclAccountOut(serializers.Serializer):
    """A plain_acl.yml account as the broker answers it (``secretKey`` is ``***`` unless you
    have the admin role on the cluster)."""

    accessKey = serializers.CharField()  # noqa: N815
    secretKey = serializers.CharField()  # noqa: N815
    whiteRemoteAddress = serializers.CharField(allow_blank=True)  # noqa: N815
    admin = serializers.BooleanField()
    defaultTopicPerm = serializers.CharField()  # noqa: N815
    defaultGroupPerm = serializers.CharField()  # noqa: N815
    topicPerms = serializers.ListField(child=serializers.CharField())  # noqa: N815
    groupPerms = serializers.ListField(child=serializers.CharField())  # noqa: N815


class AclBrokerOut(serializers.Serializer):
    """One master's ACL: the global white list and the accounts."""

    broker = serializers.CharField()
    globalWhiteAddrs = serializers.ListField(child=serializers.CharField())  # noqa: N815
    plainAccessConfigs = AclAccountOut(many=True)  # noqa: N815


class AclOut(serializers.Serializer):
    """Each master's ACL."""

    cluster = serializers.CharField()
    brokers = AclBrokerOut(many=True)


class AclAccountSavedOut(serializers.Serializer):
    """An account created or updated (201): its access key and the masters it was saved on."""

    accessKey = serializers.CharField()  # noqa: N815
    brokers = serializers.ListField(child=serializers.CharField())


class WhiteListOut(serializers.Serializer):
    """The global white list now in force, and the masters it was written to."""

    addresses = serializers.ListField(child=serializers.CharField())
    brokers = serializers.ListField(child=serializers.CharField())


class TrafficTopOut(serializers.Serializer):
    """A series with the most messages that day."""

    name = serializers.CharField()
    messages = serializers.IntegerField()


class TrafficOut(serializers.Serializer):
    """Messages put per minute over a day (UTC), per broker or per topic: ``series`` maps
    each name to ``[minute (epoch ms), messages]`` pairs; ``top`` the ten busiest; ``asOf``
    the newest snapshot read (epoch ms; null when the day has none)."""

    date = serializers.DateField()
    by = serializers.ChoiceField(choices=["broker", "topic"])
    asOf = serializers.IntegerField(allow_null=True)  # noqa: N815
    series = serializers.DictField(
        child=serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()))
    )
    top = TrafficTopOut(many=True)


class ReplicaOut(serializers.Serializer):
    """One slave of a broker set (``replication.broker_sets``): the master's view of its HA
    link joined with the slave's own.  ``brokerId`` null: a link the master holds that no
    listed slave accounts for; ``registered`` false: a slave the nameservers no longer list
    (remembered from earlier checks).  ``connected``: the link is up by every side that
    answered.  ``ackedOffset``, ``behindMs`` (age of the oldest byte it lacks), ``inSync``
    and ``lastReportMs`` (epoch ms) are the master's figures, null without a link;
    ``behindBytes`` the master's, else the master's log end less ``maxOffset`` (what the
    slave holds).  ``lagging``: behind more than the replication limits (null: unknown).
    ``problems``: the slave's own (link, metadata sync) and the master's refusals of it;
    ``error``: why the slave could not be read."""

    addr = serializers.CharField()
    brokerId = serializers.IntegerField(allow_null=True)  # noqa: N815
    registered = serializers.BooleanField()
    connected = serializers.BooleanField()
    maxOffset = serializers.IntegerField(allow_null=True)  # noqa: N815
    ackedOffset = serializers.IntegerField(allow_null=True)  # noqa: N815
    behindBytes = serializers.IntegerField(allow_null=True)  # noqa: N815
    behindMs = serializers.IntegerField(allow_null=True)  # noqa: N815
    inSync = serializers.BooleanField(allow_null=True)  # noqa: N815
    lastReportMs = serializers.IntegerField(allow_null=True)  # noqa: N815
    lastFrameMs = serializers.IntegerField(allow_null=True)  # noqa: N815
    lagging = serializers.BooleanField(allow_null=True)
    problems = serializers.ListField(child=serializers.CharField())
    error = serializers.CharField(allow_null=True)


class BrokerSetOut(serializers.Serializer):
    """One broker set (a ``brokerName``): its master's address (null: the nameservers list
    none, ``state`` "master down"), role (ASYNC_MASTER or SYNC_MASTER) and
    ``slaveReadEnable`` (null when unknown), HA address and commit-log end, the set's
    state, the links the master refused lately, why the master could not be read, and
    its slaves."""

    cluster = serializers.CharField()
    brokerName = serializers.CharField()  # noqa: N815
    master = serializers.CharField(allow_null=True)
    role = serializers.CharField(allow_null=True)
    slaveReadEnable = serializers.BooleanField(allow_null=True)  # noqa: N815
    haAddr = serializers.CharField(allow_null=True)  # noqa: N815
    maxOffset = serializers.IntegerField(allow_null=True)  # noqa: N815
    state = serializers.ChoiceField(choices=list(STATES))
    problems = serializers.ListField(child=serializers.CharField())
    error = serializers.CharField(allow_null=True)
    slaves = ReplicaOut(many=True)


class BrokerSetsOut(serializers.Serializer):
    """The cluster's broker sets, and the limits past which a slave counts as lagging
    (``QUIVER_REPLICATION_MAX_BEHIND_BYTES`` / ``_SECONDS``; 0: that limit is off)."""

    cluster = serializers.CharField()
    maxBehindBytes = serializers.IntegerField()  # noqa: N815
    maxBehindSeconds = serializers.IntegerField()  # noqa: N815
    brokerSets = BrokerSetOut(many=True)  # noqa: N815
