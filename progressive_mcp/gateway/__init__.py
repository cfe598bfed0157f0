"""The gateway: many MCP servers behind one progressive endpoint, with a tool store kept in sync by content hash.

Modules: `config` (the servers file), `documents` (tool documents and their hashes), `store` (where synced
documents live), `sync` (the create / update / delete diff), `connections` (clients of the servers, made on
demand), `tools` (the catalog of the stored tools) and `gateway` (all of them together).
"""
