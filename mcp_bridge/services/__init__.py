"""State changes of mcp_bridge, one module per entity: ``servers``, ``catalogue``,
``ui_resources``, ``oauth_grants``. Sync and DB-only; the network side is
:mod:`mcp_bridge.gateway`."""
