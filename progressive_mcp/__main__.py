"""`python -m progressive_mcp …`: the `progressive-mcp` command (see progressive_mcp.cli)."""

from progressive_mcp.cli import main

raise SystemExit(main())
