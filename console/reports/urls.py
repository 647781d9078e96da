"""Route the report pages and endpoints."""

from __future__ import annotations

from django.urls import path

from console.reports import api, views

app_name = "reports"

page = "clusters/<slug:cluster>/reports/"
base = "api/clusters/<slug:cluster>/reports/"
table = base + "<uuid:run_id>/tables/<str:table>/"
urlpatterns = [
    path(page, views.report_list, name="list"),
    path(page + "run/", views.run_now, name="run-now"),
    path(page + "compare/", views.report_compare, name="compare"),
    path(page + "<uuid:run_id>/", views.report_run, name="run"),
    path(page + "<uuid:run_id>/log/", views.report_log, name="run-log"),
    path(base, api.ReportRunsView.as_view(), name="api-list"),
    path(base + "compare/", api.ReportCompare.as_view(), name="api-compare"),
    path(base + "<uuid:run_id>/", api.ReportRunDetail.as_view(), name="api-detail"),
    path(table, api.ReportTable.as_view(), name="api-table"),
    path(table + "csv/", api.ReportTableCsv.as_view(), name="api-table-csv"),
    path(table + "parquet/", api.ReportTableParquet.as_view(), name="api-table-parquet"),
]
