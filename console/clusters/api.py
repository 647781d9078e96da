"""REST endpoints of clusters and brokers: the cluster list, brokers with figures, broker
sets and their replication, broker config (read; changed where RocketMQ allows it, by
admins), health checks, the delay schedule, ACL accounts and traffic over a day.  Each view
parses, calls ``services`` (or ``replication``, or a topology read of ``nameserver``) and
responds."""

from __future__ import annotations

import datetime as dt
from typing import cast

from django.shortcuts import get_object_or_404
from rest_framework import status
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker_core.errors import AdminError
from console.clusters import replication, services, traffic
from console.clusters import serializers as out
from console.clusters.serializers import AclAccount, BrokerConfigChange, ClusterSerializer, WhiteList
from console.core.access import allowed, role_name
from console.core.apiviews import ClusterAPIView, documented
from console.quiver import platform_settings
from nameserver.clusters import managed_clusters
from nameserver.models import Cluster
from nameserver.topology import broker_rows


class ClusterList(APIView):
    """GET: the clusters you may see, with your role on each.  POST (superusers): add one."""

    def get_permissions(self) -> list:
        return [IsAuthenticated()] if self.request.method == "GET" else [IsAdminUser()]

    @documented("List the clusters you may see", operation_id="clusters_list", responses=out.ClusterListOut)
    def get(self, request: Request) -> Response:
        clusters = [
            {"name": c.name, "namesrvAddr": c.namesrv_addr, "role": role_name(request.user, c.name)}
            for c in managed_clusters()
            if allowed(request.user, c.name, "view")
        ]
        return Response({"clusters": clusters})

    @documented("Add a cluster", request=ClusterSerializer, responses={201: out.ClusterOut})
    def post(self, request: Request) -> Response:
        form = ClusterSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        cluster = services.create_cluster(request, form.validated_data)
        return Response(services.cluster_fields(cluster), status=status.HTTP_201_CREATED)


class ClusterDetail(APIView):
    """GET, PUT, DELETE one configured cluster (changes: superusers only)."""

    def get_permissions(self) -> list:
        return [IsAuthenticated()] if self.request.method == "GET" else [IsAdminUser()]

    @documented("One configured cluster", responses={200: out.ClusterOut, 404: out.ClusterNotFoundOut})
    def get(self, request: Request, cluster: str) -> Response:
        row = get_object_or_404(Cluster, name=cluster)
        if not allowed(request.user, row.name, "view"):
            return Response({"error": "not_found", "detail": f"no cluster {cluster!r}"}, status=404)
        return Response(services.cluster_fields(row))

    @documented("Change a configured cluster", request=ClusterSerializer, responses=out.ClusterOut)
    def put(self, request: Request, cluster: str) -> Response:
        row = get_object_or_404(Cluster, name=cluster)
        form = ClusterSerializer(row, data=request.data)
        form.is_valid(raise_exception=True)
        row = services.update_cluster(request, row, form.validated_data)
        return Response(services.cluster_fields(row))

    @documented("Remove a configured cluster", responses={204: None})
    def delete(self, request: Request, cluster: str) -> Response:
        services.delete_cluster(request, get_object_or_404(Cluster, name=cluster))
        return Response(status=status.HTTP_204_NO_CONTENT)


class BrokerList(ClusterAPIView):
    """GET: every broker of the cluster with version, role, TPS in/out, messages today, disk use."""

    @documented("Brokers with version, role, TPS, messages today, disk use", responses=out.BrokerListOut)
    def get(self, request: Request, cluster: str) -> Response:
        rows = self.admin(broker_rows)
        return Response(
            {
                "cluster": self.cluster.name,
                "brokers": rows,
                "unreadable": [r["addr"] for r in rows if r["error"]],
            }
        )


class BrokerSets(ClusterAPIView):
    """GET: each broker set (brokers sharing a name): master, role, ``slaveReadEnable``, and
    per slave its HA link as both sides see it (connected, offset acknowledged, lag in bytes
    and ms, in sync, problems); a broker that does not answer is named with its error."""

    @documented("Broker sets: masters, slaves and replication lag", responses=out.BrokerSetsOut)
    def get(self, request: Request, cluster: str) -> Response:
        remembered = replication.remembered_slaves(self.cluster.name)
        limits = replication.LagLimits.from_settings()
        sets = self.admin(lambda admin: replication.broker_sets(admin, remembered, limits))
        return Response(
            {
                "cluster": self.cluster.name,
                "maxBehindBytes": limits.max_bytes,
                "maxBehindSeconds": limits.max_ms // 1000,
                "brokerSets": sets,
            }
        )


class BrokerConfig(ClusterAPIView):
    """GET: the broker's running settings.  PUT (admins): change some until it restarts."""

    needs = {"PUT": "admin"}

    @documented("A broker's running settings", responses=out.BrokerConfigOut)
    def get(self, request: Request, cluster: str, addr: str) -> Response:
        config = self.admin(lambda admin: admin.broker_config(addr))
        return Response({"broker": addr, "config": config})

    @documented(
        "Change broker settings until it restarts", request=BrokerConfigChange, responses=out.BrokerConfigOut
    )
    def put(self, request: Request, cluster: str, addr: str) -> Response:
        form = BrokerConfigChange(data=request.data)
        form.is_valid(raise_exception=True)
        config = services.update_broker_config(request, self.cluster, addr, form.validated_data["changes"])
        return Response({"broker": addr, "config": config})


class Health(ClusterAPIView):
    """GET: the cluster's health checks, each ``{check, ok, detail}``."""

    @documented("Health checks of the cluster", responses=out.HealthOut)
    def get(self, request: Request, cluster: str) -> Response:
        checks = self.admin(services.health_checks)
        return Response({"cluster": self.cluster.name, "ok": all(c["ok"] for c in checks), "checks": checks})


class Schedule(ClusterAPIView):
    """GET: delayed messages waiting per delay level (next due) and pending half messages (age)."""

    @documented(
        "Delayed backlog per level and pending transactional half messages", responses=out.ScheduleOut
    )
    def get(self, request: Request, cluster: str) -> Response:
        return Response({"cluster": self.cluster.name, **self.admin(services.schedule_rows)})


class Acl(ClusterAPIView):
    """GET: each master's ACL (global white list and accounts; secrets only to admins).
    POST (admin role): create or update an account on every master."""

    needs = {"POST": "admin"}

    @documented("The brokers' ACL accounts and white list", responses=out.AclOut)
    def get(self, request: Request, cluster: str) -> Response:
        show_secrets = allowed(request.user, cluster, "admin")
        rows = self.admin(lambda admin: services.acl_rows(admin, show_secrets=show_secrets))
        return Response({"cluster": self.cluster.name, "brokers": rows})

    @documented(
        "Create or update an ACL account on every master",
        request=AclAccount,
        responses={201: out.AclAccountSavedOut},
    )
    def post(self, request: Request, cluster: str) -> Response:
        form = AclAccount(data=request.data)
        form.is_valid(raise_exception=True)
        account = cast(services.AclAccountData, form.validated_data)
        brokers = services.save_acl_account(request, self.cluster, account)
        return Response(
            {"accessKey": account["accessKey"], "brokers": brokers}, status=status.HTTP_201_CREATED
        )


class AclAccountDetail(ClusterAPIView):
    """DELETE (admin role): remove the account from every master."""

    needs = {"DELETE": "admin"}

    @documented("Delete an ACL account from every master", responses={204: None})
    def delete(self, request: Request, cluster: str, access_key: str) -> Response:
        services.delete_acl_account(request, self.cluster, access_key)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AclWhiteList(ClusterAPIView):
    """PUT (admin role) ``{addresses}``: the addresses that need no account, on every master."""

    needs = {"PUT": "admin"}

    @documented(
        "Replace the ACL global white list on every master", request=WhiteList, responses=out.WhiteListOut
    )
    def put(self, request: Request, cluster: str) -> Response:
        form = WhiteList(data=request.data)
        form.is_valid(raise_exception=True)
        addresses = form.validated_data["addresses"]
        brokers = services.replace_white_list(request, self.cluster, addresses)
        return Response({"addresses": addresses, "brokers": brokers})


class Traffic(ClusterAPIView):
    """GET ``?date=YYYY-MM-DD`` (default today, UTC) ``&by=broker|topic`` ``&topic=``: messages
    put per minute that day, from the offset history (RocketMQ Dashboard's broker and topic
    charts).  ``top`` lists the topics with the most messages that day; ``asOf`` is when the
    newest snapshot read was taken (epoch ms; null when the day has none)."""

    @documented("Messages per minute over a day, per broker or per topic", responses=out.TrafficOut)
    def get(self, request: Request, cluster: str) -> Response:
        raw = request.query_params.get("date") or dt.datetime.now(dt.UTC).date().isoformat()
        try:
            day = dt.date.fromisoformat(raw)
        except ValueError:
            raise AdminError(f"date must be YYYY-MM-DD, not {raw!r}") from None
        by = request.query_params.get("by", "broker")
        if by not in ("broker", "topic"):
            raise AdminError("by is broker or topic")
        topic = request.query_params.get("topic") or None
        self.cluster  # noqa: B018 (a cluster that does not exist is a 404)
        traffic_day = traffic.puts_day(
            platform_settings()["HISTORY_DIR"], day, cluster=cluster, topic=topic, by=by
        )
        return Response(
            {
                "date": day.isoformat(),
                "by": by,
                "asOf": traffic_day.as_of_ms,
                "series": traffic_day.series,
                "top": [{"name": n, "messages": c} for n, c in traffic_day.top()],
            }
        )
