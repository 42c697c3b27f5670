"""Every state change of chat: typed, keyword-only services named ``<entity>_<action>``,
each writing its audit row in the same transaction and broadcasting on commit.

- ``workspaces``: workspaces, memberships, threads, people's and system messages (re-exported
  here: ``services.thread_create``…);
- ``turns``: assistant messages as they stream, and a turn's audit rows;
- ``turn_lease``: one model turn per thread across processes;
- ``app_views``: what an app view changes (its messages to the thread, its state).

(``chat.media.services`` holds the media persistence services; ``chat.calls`` the tool-call
pipeline and deciding an approval.)
"""

from chat.services.workspaces import (
    MAX_MESSAGE_CHARS,
    ChatError,
    membership_set,
    message_create_for_member,
    message_post,
    message_post_system,
    thread_create,
    workspace_create,
)

__all__ = [
    "MAX_MESSAGE_CHARS",
    "ChatError",
    "membership_set",
    "message_create_for_member",
    "message_post",
    "message_post_system",
    "thread_create",
    "workspace_create",
]
