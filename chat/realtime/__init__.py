"""The live side of a thread (DESIGN §6): the websocket (``guard``, ``routing``,
``consumers``) above the bus it listens to — thread events and their sequence (``events``),
the cross-process tail (``event_tail``), waiters for an answer (``waiters``) and the
channel-layer group names (``groups``). The bus imports nothing else of chat but its models."""
