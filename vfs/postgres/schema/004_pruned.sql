-- The highest number of a version pruning dropped (0: none): before it, the history no
-- longer knows every change.
ALTER TABLE memory_mcp_stores ADD COLUMN pruned bigint NOT NULL DEFAULT 0;
