"""Files and tool media (DESIGN §4): staging on the request path (``staging``), the worker's
verifying, storing and thumbnailing (``tasks`` → ``services``, ``processing``, ``images``,
``formats``, ``storage``) and serving them to members (``views``, ``urls``)."""
