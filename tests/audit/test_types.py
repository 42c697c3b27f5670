"""The audit event types and decisions: numbered in their ranges, stable, labelled."""

from __future__ import annotations

import pytest

from audit.types import AuditEventType, Decision, EventCategory


def test_event_types_are_numbered_in_their_ranges() -> None:
    expected_category = {
        "WORKSPACE_CREATED": EventCategory.FOUNDATION,
        "SOCKET_REJECTED": EventCategory.FOUNDATION,
        "CSP_DOMAIN_DROPPED": EventCategory.MCP,
        "TOOL_CALL_FAILED": EventCategory.TOOL,
        "VIEW_OPENED": EventCategory.VIEW,
        "APPROVAL_EXPIRED": EventCategory.APPROVAL,
        "POLICY_CHANGED": EventCategory.BINDING,
        "MEDIA_REJECTED": EventCategory.MEDIA,
        "OAUTH_CALL_AUTHORIZED": EventCategory.AUTH,
    }
    for name, category in expected_category.items():
        assert AuditEventType[name].category is category
    for member in AuditEventType:
        assert 100 <= member.value < 1000  # 9xx: server requests to a person (issue 25)
        assert member.label and member.label[0].isupper()


def test_event_type_values_and_labels_are_unique() -> None:
    assert len(AuditEventType.__members__) == len(list(AuditEventType))  # no aliases
    labels = [member.label for member in AuditEventType]
    assert len(labels) == len(set(labels))
    assert AuditEventType.choices()[0] == (100, "Workspace created")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKSPACE_CREATED", 100),
        ("MEMBERSHIP_CHANGED", 101),
        ("THREAD_CREATED", 102),
        ("MESSAGE_POSTED", 110),
        ("SOCKET_REJECTED", 120),
        ("SERVER_ADDED", 200),
        ("SERVER_CHANGED", 201),
        ("SERVER_REMOVED", 202),
        ("CATALOGUE_REFRESHED", 210),
        ("UI_RESOURCE_FETCHED", 220),
        ("CSP_DOMAIN_DROPPED", 221),
        ("TOOL_CALL_MODEL", 300),
        ("TOOL_CALL_USER", 301),
        ("TOOL_CALL_APP", 302),
        ("TOOLS_OFFERED_TO_MODEL", 303),
        ("TOOL_CALL_COMPLETED", 310),
        ("TOOL_CALL_FAILED", 311),
        ("RESOURCE_READ", 400),
        ("UI_MESSAGE", 401),
        ("UI_UPDATE_MODEL_CONTEXT", 402),
        ("UI_OPEN_LINK", 403),
        ("UI_REQUEST_DISPLAY_MODE", 404),
        ("UI_DOWNLOAD_FILE", 405),
        ("VIEW_LOG_MESSAGE", 406),
        ("LEGACY_ACTION", 407),
        ("WIDGET_STATE_SET", 408),
        ("VIEW_TOKEN_REJECTED", 409),
        ("VIEW_OPENED", 410),
        ("APPROVAL_REQUESTED", 500),
        ("APPROVAL_APPROVED", 501),
        ("APPROVAL_REJECTED", 502),
        ("APPROVAL_EXPIRED", 503),
        ("BINDING_CREATED", 600),
        ("BINDING_CHANGED", 601),
        ("BINDING_REMOVED", 602),
        ("OAUTH_CONNECTED", 800),
        ("OAUTH_DISCONNECTED", 801),
        ("OAUTH_REFRESH_FAILED", 802),
        ("OAUTH_CONNECT_FAILED", 803),
        ("OAUTH_CALLBACK_REJECTED", 804),
        ("OAUTH_CALL_AUTHORIZED", 810),
        ("OAUTH_AUTHORIZATION_REQUIRED", 811),
        ("SERVER_REQUEST_OPENED", 900),
        ("SERVER_REQUEST_ANSWERED", 901),
        ("SERVER_REQUEST_EXPIRED", 902),
        ("SERVER_REQUEST_REFUSED", 903),
        ("SERVER_REQUEST_COMPLETED", 904),
        ("SAMPLING_ALLOWANCE_CREATED", 905),
        ("TASK_CREATED", 330),
        ("TASK_STATUS_CHANGED", 331),
        ("TASK_CANCEL_SENT", 332),
        ("TASK_EXPIRED", 333),
        ("TASK_REFUSED", 334),
        ("POLICY_CHANGED", 610),
        ("MEDIA_STAGED", 700),
        ("MEDIA_READY", 701),
        ("MEDIA_REJECTED", 702),
    ],
)
def test_event_type_numbers_are_stable(name: str, value: int) -> None:
    """Numbers are stored in audit rows: they must never change."""
    assert AuditEventType[name].value == value


def test_decision_values() -> None:
    assert [d.value for d in Decision] == [
        "allowed",
        "denied",
        "pending",
        "approved",
        "rejected",
        "failed",
    ]
    assert Decision.choices()[0] == ("allowed", "Allowed")
