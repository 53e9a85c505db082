-- memory-mcp's PostgreSQL schema, version 1. Many stores share one database; every row
-- belongs to one store, and a store's rows are changed only under its advisory lock.
CREATE TABLE memory_mcp_stores (
	id            bigserial PRIMARY KEY,
	name          text NOT NULL UNIQUE,
	generation    bigint NOT NULL DEFAULT 0, -- bumped by every transaction that changes the store
	usage         bigint NOT NULL DEFAULT 0, -- bytes of all files
	next_seq      bigint NOT NULL DEFAULT 1, -- the history's next version number
	history_bytes bigint NOT NULL DEFAULT 0  -- bytes of the contents the history keeps
);

-- Files and directories by storage name ("a/b.md"; the root is implicit). Names compare
-- in byte order (COLLATE "C"), as listings sort; a file's content lives in its row
-- (PostgreSQL compresses and moves large values out of line by itself).
CREATE TABLE memory_mcp_entries (
	store    bigint NOT NULL REFERENCES memory_mcp_stores (id) ON DELETE CASCADE,
	path     text COLLATE "C" NOT NULL,
	parent   text COLLATE "C" NOT NULL,
	name     text COLLATE "C" NOT NULL,
	dir      boolean NOT NULL,
	size     bigint NOT NULL DEFAULT 0,
	content  bytea,
	accessed bigint, -- Unix seconds of the last view or change, when access is tracked
	PRIMARY KEY (store, path)
);
CREATE INDEX memory_mcp_entries_parent ON memory_mcp_entries (store, parent, name);

-- The history: contents once per digest, and versions.
CREATE TABLE memory_mcp_contents (
	store  bigint NOT NULL REFERENCES memory_mcp_stores (id) ON DELETE CASCADE,
	sha256 bytea NOT NULL,
	size   bigint NOT NULL,
	data   bytea NOT NULL,
	PRIMARY KEY (store, sha256)
);

CREATE TABLE memory_mcp_versions (
	store         bigint NOT NULL REFERENCES memory_mcp_stores (id) ON DELETE CASCADE,
	id            bigserial,
	seq           bigint NOT NULL,
	time          timestamptz NOT NULL,
	actor         text NOT NULL,
	command       text NOT NULL,
	kind          text NOT NULL,
	path          text NOT NULL,
	new_path      text NOT NULL DEFAULT '',
	size          bigint NOT NULL DEFAULT 0,
	sha256        bytea,
	prev_size     bigint NOT NULL DEFAULT 0,
	prev          bytea,
	redacted_by   text,
	redacted_time timestamptz,
	prev_redacted boolean NOT NULL DEFAULT false,
	PRIMARY KEY (store, id)
);
CREATE INDEX memory_mcp_versions_seq ON memory_mcp_versions (store, seq);
CREATE INDEX memory_mcp_versions_time ON memory_mcp_versions (store, time);
CREATE INDEX memory_mcp_versions_sha256 ON memory_mcp_versions (store, sha256);
CREATE INDEX memory_mcp_versions_prev ON memory_mcp_versions (store, prev);
CREATE INDEX memory_mcp_versions_path ON memory_mcp_versions (store, path);
CREATE INDEX memory_mcp_versions_new_path ON memory_mcp_versions (store, new_path);
