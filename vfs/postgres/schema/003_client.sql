-- The MCP client each version came through (its name and version, the tenant, the transport).
ALTER TABLE memory_mcp_versions ADD COLUMN client jsonb;
