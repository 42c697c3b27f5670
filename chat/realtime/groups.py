"""Channel-layer group names (one place, so the bus and its waiters agree)."""


def thread_group(thread_id: int) -> str:
    """Every socket (and waiter) following one thread."""
    return f"thread.{thread_id}"


def user_group(user_id: int) -> str:
    """Every socket of one user (closed when their session ends: chat.receivers)."""
    return f"user.{user_id}"


# Every process that runs tool calls (one channel each, chat.calls.stops): a member's "stop"
# reaches the process running the call, whichever process the member is connected to.
CALL_RUNNERS = "call-runners"


def call_stop_message(call_id: int) -> dict[str, int | str]:
    """What `CALL_RUNNERS` is sent to stop a call running in another process."""
    return {"type": "call.stop", "call_id": call_id}
