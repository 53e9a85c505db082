-- memory-mcp's PostgreSQL schema, version 2: what replicas share besides the stores.

-- Streamable HTTP sessions, so that any replica serves a session another one started.
CREATE TABLE memory_mcp_sessions (
	id        text PRIMARY KEY,
	tenant    text NOT NULL,
	last_seen timestamptz NOT NULL
);
CREATE INDEX memory_mcp_sessions_tenant ON memory_mcp_sessions (tenant, last_seen);
CREATE INDEX memory_mcp_sessions_last_seen ON memory_mcp_sessions (last_seen);

-- Keys every replica uses alike: the one that signs session ids.
CREATE TABLE memory_mcp_keys (
	name text PRIMARY KEY,
	key  bytea NOT NULL
);

-- When a replica last claimed a store's expiry sweep, so that one replica at a time sweeps it.
ALTER TABLE memory_mcp_stores ADD COLUMN swept timestamptz;

-- Times to the nanosecond, as the other backends keep them (timestamptz keeps microseconds):
-- the nanoseconds past the microsecond, so that a history moves between backends exactly.
ALTER TABLE memory_mcp_versions ADD COLUMN time_ns int NOT NULL DEFAULT 0;
ALTER TABLE memory_mcp_versions ADD COLUMN redacted_ns int NOT NULL DEFAULT 0;
