"""Server context in a thread (issue 25): MCP prompts posted by members, server resources
attached to messages (and kept fresh by subscriptions), read under the thread's bindings.
docs/mcp-client.md ("Prompts, resources, logging and roots")."""
