"""What the maintenance endpoints answer (declared for the OpenAPI document;
``services.job_overview`` builds it from the run records in Redis and the brokers' own
maintenance status)."""

from __future__ import annotations

from rest_framework import serializers

RUN_STATUS = "ok, failed (the job failed there), unreachable (no answer), skipped (the lock was held)"


class MaintenanceRunOut(serializers.Serializer):
    """One run the platform recorded (``runs.RunRecord``, field names as recorded): the job,
    the broker (``platform`` for the platform's own job), when it started (epoch ms), how
    long it took, its status, the one-line result, the job's figures, and ``ok`` (ok or
    skipped)."""

    job = serializers.CharField()
    broker_addr = serializers.CharField()
    started_ms = serializers.IntegerField()
    duration_ms = serializers.FloatField()
    status = serializers.CharField(help_text=RUN_STATUS)
    result = serializers.CharField(allow_blank=True)
    broker_name = serializers.CharField(allow_blank=True)
    cluster = serializers.CharField(allow_blank=True)
    details = serializers.DictField()
    ok = serializers.BooleanField()


class JobBrokerRunOut(MaintenanceRunOut):
    """A job's last run on one broker, and who drives the job there now as the broker says:
    ``driver`` (platform, broker or none; null when the broker was not asked or did not
    answer), ``fallback`` (the broker's own timer runs it because the platform's passes
    stopped), and who ran it last there and when (epoch ms)."""

    driver = serializers.CharField(allow_null=True)
    fallback = serializers.BooleanField()
    lastRunBy = serializers.CharField(allow_null=True)  # noqa: N815
    lastRunByBrokerMs = serializers.IntegerField(allow_null=True)  # noqa: N815


class JobStatusOut(serializers.Serializer):
    """One job: its schedule, when it last went out to the brokers (epoch ms; null: never)
    and why not, whether it is overdue and why, the brokers whose last run failed, and the
    last run on each broker."""

    job = serializers.CharField()
    title = serializers.CharField()
    everySeconds = serializers.FloatField()  # noqa: N815
    lastFanoutMs = serializers.IntegerField(allow_null=True)  # noqa: N815
    fanoutError = serializers.CharField(allow_blank=True)  # noqa: N815
    overdue = serializers.BooleanField()
    overdueReason = serializers.CharField(allow_blank=True)  # noqa: N815
    failing = serializers.ListField(child=serializers.CharField())
    brokers = JobBrokerRunOut(many=True)


class BrokerJobRunOut(serializers.Serializer):
    """A run as the broker keeps it: the job, when (epoch ms), how long, whether it
    succeeded, its result and figures, and who ran it (platform, broker or manual)."""

    job = serializers.CharField()
    startedMs = serializers.IntegerField()  # noqa: N815
    durationMs = serializers.FloatField()  # noqa: N815
    ok = serializers.BooleanField()
    result = serializers.CharField(allow_blank=True)
    details = serializers.DictField()
    runner = serializers.CharField(allow_blank=True)


class BrokerJobStateOut(serializers.Serializer):
    """Who drives one job on a broker (platform, broker or none), whether the broker runs
    it only as a fallback, the lease and what is left of it, the platform's last pass and
    the last run (epoch ms), and how often the broker delivered delayed messages the
    platform left overdue."""

    job = serializers.CharField()
    driver = serializers.CharField(allow_blank=True)
    fallback = serializers.BooleanField()
    leaseMs = serializers.IntegerField()  # noqa: N815
    leaseLeftMs = serializers.IntegerField()  # noqa: N815
    lastPlatformMs = serializers.IntegerField(allow_null=True)  # noqa: N815
    lastRun = BrokerJobRunOut(allow_null=True)  # noqa: N815
    rescues = serializers.IntegerField()
    lastRescueMs = serializers.IntegerField(allow_null=True)  # noqa: N815


class UnconsumedOut(serializers.Serializer):
    """A group that had not consumed messages expiry deleted: how many, on how many queues."""

    group = serializers.CharField()
    topic = serializers.CharField()
    messages = serializers.IntegerField()
    queues = serializers.IntegerField()


class DeletionOut(serializers.Serializer):
    """An expiry run that deleted something (``services.deletion_row``): the broker, when it
    started (epoch ms) and who ran it, why, the segments and commit-log files deleted, the
    commit-log range, the messages deleted (per topic) and the groups that had not consumed
    them."""

    brokerAddr = serializers.CharField()  # noqa: N815
    brokerName = serializers.CharField(allow_blank=True)  # noqa: N815
    cluster = serializers.CharField(allow_blank=True)
    startedMs = serializers.IntegerField()  # noqa: N815
    runner = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)
    segments = serializers.ListField(child=serializers.CharField())
    commitLogFilesDeleted = serializers.IntegerField()  # noqa: N815
    fromOffset = serializers.IntegerField()  # noqa: N815
    toOffset = serializers.IntegerField()  # noqa: N815
    messages = serializers.IntegerField()
    messagesByTopic = serializers.DictField(child=serializers.IntegerField())  # noqa: N815
    unconsumed = UnconsumedOut(many=True)
    unconsumedMessages = serializers.IntegerField()  # noqa: N815


class DamagedRangeOut(serializers.Serializer):
    """A damaged commit-log range on record: where (byte offsets), its size, why, and when it
    was found (epoch ms)."""

    start = serializers.IntegerField()
    end = serializers.IntegerField()
    size = serializers.IntegerField()
    reason = serializers.CharField(allow_blank=True)
    foundMs = serializers.IntegerField()  # noqa: N815


class BrokerDriversOut(serializers.Serializer):
    """A broker seen lately, as it reports its maintenance: its ``standaloneMaintenance``
    mode, each job's state, the jobs it runs as a fallback, its expiry runs that deleted
    something, its damaged ranges, and why its store is read-only (null: it takes writes).
    A broker that did not answer has ``reachable`` false, ``error`` and empty figures."""

    brokerAddr = serializers.CharField()  # noqa: N815
    brokerName = serializers.CharField()  # noqa: N815
    cluster = serializers.CharField()
    master = serializers.BooleanField()
    reachable = serializers.BooleanField()
    error = serializers.CharField(allow_blank=True)
    mode = serializers.CharField(allow_blank=True)
    jobs = serializers.DictField(child=BrokerJobStateOut())
    fallback = serializers.ListField(child=serializers.CharField())
    deletions = DeletionOut(many=True)
    damaged = DamagedRangeOut(many=True)
    diskFull = serializers.CharField(allow_null=True)  # noqa: N815


class JobOverviewOut(serializers.Serializer):
    """Every job's status, every broker's own view of its maintenance, the brokers running
    a job as a fallback, the recent runs (newest first) and what expiry deleted lately."""

    jobs = JobStatusOut(many=True)
    brokers = BrokerDriversOut(many=True)
    fallbackBrokers = serializers.ListField(child=serializers.CharField())  # noqa: N815
    recent = MaintenanceRunOut(many=True)
    deletions = DeletionOut(many=True)


class JobQueuedOut(serializers.Serializer):
    """A job queued to run now on every broker (202), and the Celery task's id."""

    job = serializers.CharField()
    taskId = serializers.CharField()  # noqa: N815


class JobErrorOut(serializers.Serializer):
    """Why there is no answer: ``bad_request`` (400), ``not_found`` (404: no such job; the
    detail names the jobs), ``redis_unavailable`` or ``queue_unavailable`` (503)."""

    error = serializers.CharField()
    detail = serializers.CharField()
