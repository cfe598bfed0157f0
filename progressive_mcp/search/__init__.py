"""Finding tools: the TOOL_SEARCH ranker, its word lists, and the evaluation of its quality."""
