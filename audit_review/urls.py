"""Audit review pages, included under ``/audit/`` (namespace ``audit``)."""

from django.urls import path

from . import views

app_name = "audit"

urlpatterns = [
    path("", views.report, name="report"),
    path("export.csv", views.export_csv, name="export-csv"),
    path("export.json", views.export_json, name="export-json"),
]
