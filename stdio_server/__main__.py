"""`python -m stdio_server`: see stdio_server.server.main."""

from stdio_server.server import main

raise SystemExit(main())
