"""The agent loop: hands a thread to the workspace's model provider after a message.

``start_turn`` is called after every non-command user message (and after a view's
``ui/message``). It returns at once; the turn runs in a background task
(``runtime.spawn("agent:<thread id>")``), never inside the socket handler.

One turn per thread at a time, across every process: a turn runs only while its process
holds the thread's lease (:mod:`chat.services.turn_lease`, fenced writes). A message posted while a
turn runs — here or in another process — is not lost and not answered twice: it is
*folded into the next turn* — when the running turn ends, one more turn starts for the
thread, built from the thread as it is then (so it sees every message posted meanwhile).
A message stored before the running turn's first output instead *supersedes* its model
request: the request is dropped unread and made again with both (``run_turn``), so
messages posted together get one answer.

A turn:

1. Loads what the model may see: the thread's messages (user messages, prefixed with the
   author's name when several people talk), earlier assistant messages with their tool
   calls and results (results as ``mcp_bridge.normalize.model_content`` only — never
   result ``_meta``, invariant 8), tool calls people ran with ``/call`` as notes, the
   tools ``bindings.selectors.offered_tools`` offers (namespaced ``<server>__<tool>``),
   and the latest ``ui/update-model-context`` of each view (in the system prompt).
2. Streams the answer: an assistant message is created with status ``streaming``; text
   arrives as coalesced ``message.delta`` events (every ``FLUSH_INTERVAL`` seconds or
   ``FLUSH_CHARS`` characters); streamed tool-call arguments become
   ``toolcall.input-partial`` events (best-effort JSON repair, same rate); the final
   ``message`` event has status ``complete`` and the rendered HTML. A tool with a view gets
   its call row (status ``streaming``, so its view mounts) as soon as the model starts the
   call; the partial arguments are stored on it, and the decision fills that row in.
3. Runs the tool calls in order through ``chat.calls.run.tool_call_start(origin="model")`` —
   the same policy and approval flow as every other call — and waits for each to end
   (an approval may take up to ``ATRIUM_APPROVAL_TTL``); a refused call's reason goes back
   to the model as an error result.
4. Repeats with the results until the model answers without tools, or
   ``ATRIUM_AGENT_MAX_STEPS`` requests were made (then says so in the thread).

Provider failures (refused key, unreachable host, unreadable stream, timeouts) become an
assistant message with status ``error``; the user's message is already stored.

``cancel_turn`` (a member's Stop) cancels the turn's task: the answer ends as stopped, calls
still streaming end ``cancelled``, the call the turn waits for is cancelled on its server,
and no folded turn follows.

The modules, at the loop's seams:

- ``turns``: scheduling — ``start_turn``, the per-thread gate and lease, folding,
  ``cancel_turn``, ``turn_running``, ``wait_idle`` — and ``run_turn``, a turn's model steps;
- ``context``: what the model sees (``load_context``, the system prompt, the views'
  context, the history and its size limits, ``result_for_model``);
- ``steps``: one model request's stream turned into stored events (``_StepOutput``);
- ``tools``: running the tool calls of a step (``wait_for_call``).
"""

from .context import TurnContext, context_text, load_context, result_for_model
from .tools import wait_for_call
from .turns import cancel_turn, run_turn, start_turn, turn_running, wait_idle

__all__ = [
    "TurnContext",
    "cancel_turn",
    "context_text",
    "load_context",
    "result_for_model",
    "run_turn",
    "start_turn",
    "turn_running",
    "wait_for_call",
    "wait_idle",
]
