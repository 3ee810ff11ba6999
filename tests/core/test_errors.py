"""Every wire code maps to its status and flat body (002, "Wire errors")."""

from __future__ import annotations

import pytest

from helix_django import errors

CASES = [
    (errors.SessionNotFoundError(), 404, {"error": "Session not found", "code": "state_session_not_found"}),
    (errors.HistoryIncompleteError(cause="snapshot_unstable"), 503, {"code": "state_history_incomplete"}),
    (errors.HistoryIncompleteError(cause="store_error"), 503, {"code": "state_history_incomplete"}),
    (errors.HistoryIncompleteError(cause="short_read"), 503, {"code": "state_history_incomplete"}),
    (errors.HistoryIncompleteError(cause="corrupt_row"), 409, {"code": "state_history_incomplete"}),
    (errors.AlreadyRunningError(), 409, {"code": "state_already_running", "retryable": True}),
    (errors.RunStartConflictError(cause="idempotency_mismatch"), 409, {"code": "state_run_start_conflict"}),
    (errors.RequestKeyConflictError(runId="run_1"), 409, {"code": "state_request_key_conflict", "runId": "run_1"}),
    (
        errors.RequestAlreadyCompletedError(runId="run_1"),
        409,
        {"code": "state_request_already_completed", "runId": "run_1"},
    ),
    (
        errors.NotResumableError(cause="resume_message_unknown"),
        409,
        {"code": "state_not_resumable", "cause": "resume_message_unknown", "retryable": True},
    ),
    (errors.RunSupersededError(), 409, {"code": "state_run_superseded", "retryable": False}),
    (
        errors.StreamDropError(cause="run_not_live"),
        503,
        {"code": "transport_stream_drop", "cause": "run_not_live", "retryable": True},
    ),
    (errors.ValidationError(), 400, {"code": "validation_error", "retryable": False}),
    (
        errors.PayloadTooLargeError(cause="request_body", limitBytes=10, sizeBytes=11),
        413,
        {
            "code": "validation_payload_too_large",
            "retryable": False,
            "cause": "request_body",
            "limitBytes": 10,
            "sizeBytes": 11,
        },
    ),
    (errors.FrameworkInternalError(), 500, {"code": "framework_internal_error"}),
    (errors.TransportError("Snapshot unavailable"), 503, {"error": "Snapshot unavailable", "code": "transport_error"}),
    (errors.StreamConnectionError(), 503, {"code": "transport_stream_connection", "retryable": True}),
    (errors.StreamNotFoundError(), 404, {"error": "Stream not found"}),
    (errors.InvalidToolResultError(), 400, {"code": "validation_error", "cause": "invalid_result"}),
    (errors.RateLimitedError(), 429, {"code": "rate_limited", "retryable": True}),
    (errors.MethodNotAllowedError(), 405, {"code": "validation_method_not_allowed"}),
    (errors.UnsupportedMediaTypeError(), 415, {"code": "validation_unsupported_media_type"}),
    (errors.NotAcceptableError(), 406, {"code": "validation_not_acceptable"}),
    (errors.NotAuthenticatedError(), 401, {"code": "auth_not_authenticated", "retryable": False}),
    (errors.AuthenticationFailedError(), 401, {"code": "auth_failed"}),
    (errors.PermissionDeniedError(cause="csrf"), 403, {"code": "auth_permission_denied", "cause": "csrf"}),
]


@pytest.mark.parametrize(("error", "status", "expected"), CASES, ids=lambda v: getattr(v, "code", None))
def test_each_code_maps_to_status_and_body(error, status, expected):
    body = error.to_body()
    assert error.status == status
    assert errors.http_status_for(error) == status
    for key, value in expected.items():
        assert body[key] == value
    assert isinstance(body["error"], str) and body["error"]
    assert set(body) <= {"error", "code", "retryable", "cause", *expected}


def test_retryable_follows_the_status_rule():
    for error, _status, _ in CASES:
        if error.status == 503:
            assert error.is_retryable, error.code
        if (
            error.status == 409
            and error.code.startswith("state_")
            and error.code
            not in {
                "state_already_running",
                "state_not_resumable",
            }
        ):
            assert not error.is_retryable, error.code


def test_unclassified_errors_never_echo_their_text():
    secret = "prompt text: my password is hunter2"
    wrapped = errors.as_helix_error(RuntimeError(secret))
    assert wrapped.code == "framework_internal_error"
    assert secret not in str(wrapped.to_body())
    assert errors.http_status_for(RuntimeError(secret)) == 500


def test_provider_error_keeps_classification_and_detail_is_scrubbed():
    error = errors.ProviderError(retryable=True, cause="rate_limit")
    assert error.is_retryable
    assert error.to_detail() == {
        "code": "provider_error",
        "category": "provider",
        "retryable": True,
        "message": "The model provider failed",
    }
