"""AWS Lambda entry point for the HTTPS endpoint (built in the HTTPS endpoint issue)."""
