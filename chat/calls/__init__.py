"""The tool-call pipeline, whoever starts a call (a person, the model, an app view).

In the order a call travels (import the module you need; this package re-exports nothing):

- ``requests``: the typed values — ``CallRequest``, an app view's ``ViewCallRequest`` with
  its ``ViewAdmission`` (what the socket knows of the sender), ``KnownApproval``.
- ``admission``: ``view_admit`` — the member's session and membership, re-read, and the
  view its token names.
- ``input``: the row of a call whose arguments a model is still streaming.
- ``decide``: ``view_call_admit`` (a view's request → ``CallRequest``, with its
  authority's rows read in the admission's statement), then
  ``call_decide`` — the authority's decision (audited), the call row, its approval
  request and event, in one transaction.
- ``run``: ``call_start`` (one trip to the database thread for admission + decision, then
  the run in a background task), ``tool_call_run``.
- ``finish``: ``tool_call_finish`` / ``tool_call_fail`` / ``tool_call_reject`` /
  ``tool_call_fail_orphaned``.
- ``cancel``: ``tool_call_stop`` and ``tool_call_cancel``; ``stops``: a stop sent to the
  process running the call.
- ``emit``: ``call_emit``, the one way a call's event leaves.
- ``approvals``: a decided approval re-decides its call, which then runs.
- ``app_view``: a view's ``tools/call`` from start to its JSON-RPC result.
- ``runtime``: the process's background tasks; ``runners``: which process runs a call.
"""
