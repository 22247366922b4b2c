"""kx over the wire: the HTTP gateway and its limits and log, the MCP server and its policy, the SDK client."""
