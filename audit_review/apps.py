from django.apps import AppConfig


class AuditReviewConfig(AppConfig):
    """The review screens of the audit log (reports, charts, exports, the admin): the top
    app layer, which reads every other app's rows to name what the log records by id."""

    name = "audit_review"
    verbose_name = "Audit review"
