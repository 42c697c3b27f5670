"""Channel-layer group names (one place, so the bus and its waiters agree)."""


def thread_group(thread_id: int) -> str:
    """Every socket (and waiter) following one thread."""
    return f"thread.{thread_id}"


def user_group(user_id: int) -> str:
    """Every socket of one user (closed when their session ends: chat.receivers)."""
    return f"user.{user_id}"
