"""Route the cluster and broker endpoints."""

from __future__ import annotations

from django.urls import path

from nameserver import api, views

app_name = "nameserver"

urlpatterns = [
    path("clusters/", views.clusters, name="clusters"),
    path("clusters/<slug:cluster>/", views.dashboard, name="dashboard"),
    path("clusters/<slug:cluster>/brokers/<str:addr>/config/", views.broker_config, name="broker-config"),
    path("api/clusters/", api.ClusterList.as_view(), name="api-clusters"),
    path("api/clusters/<slug:cluster>/", api.ClusterDetail.as_view(), name="api-cluster"),
    path("api/clusters/<slug:cluster>/brokers/", api.BrokerList.as_view(), name="api-brokers"),
    path(
        "api/clusters/<slug:cluster>/brokers/<str:addr>/config/",
        api.BrokerConfig.as_view(),
        name="api-broker-config",
    ),
    path("api/clusters/<slug:cluster>/health/", api.Health.as_view(), name="api-health"),
    path("api/clusters/<slug:cluster>/schedule/", api.Schedule.as_view(), name="api-schedule"),
    path("api/clusters/<slug:cluster>/acl/", api.Acl.as_view(), name="api-acl"),
    path("api/clusters/<slug:cluster>/traffic/", api.Traffic.as_view(), name="api-traffic"),
    path("api/clusters/<slug:cluster>/acl/whitelist/", api.AclWhiteList.as_view(), name="api-acl-whitelist"),
    path(
        "api/clusters/<slug:cluster>/acl/accounts/<str:access_key>/",
        api.AclAccountDetail.as_view(),
        name="api-acl-account",
    ),
]
