"""Agent programs as the policy: the capture proxy, the runner, the MCP bridge, adapters."""
