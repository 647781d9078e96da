"""Route the cluster and broker pages and endpoints."""

from __future__ import annotations

from django.urls import path

from console.clusters import api, views

app_name = "clusters"

base = "api/clusters/<slug:cluster>/"
urlpatterns = [
    path("clusters/", views.clusters, name="clusters"),
    path("clusters/<slug:cluster>/", views.dashboard, name="dashboard"),
    path("clusters/<slug:cluster>/brokers/<str:addr>/config/", views.broker_config, name="broker-config"),
    path("api/clusters/", api.ClusterList.as_view(), name="api-clusters"),
    path(base, api.ClusterDetail.as_view(), name="api-cluster"),
    path(base + "brokers/", api.BrokerList.as_view(), name="api-brokers"),
    path(base + "broker-sets/", api.BrokerSets.as_view(), name="api-broker-sets"),
    path(base + "brokers/<str:addr>/config/", api.BrokerConfig.as_view(), name="api-broker-config"),
    path(base + "health/", api.Health.as_view(), name="api-health"),
    path(base + "schedule/", api.Schedule.as_view(), name="api-schedule"),
    path(base + "acl/", api.Acl.as_view(), name="api-acl"),
    path(base + "traffic/", api.Traffic.as_view(), name="api-traffic"),
    path(base + "acl/whitelist/", api.AclWhiteList.as_view(), name="api-acl-whitelist"),
    path(base + "acl/accounts/<str:access_key>/", api.AclAccountDetail.as_view(), name="api-acl-account"),
]
