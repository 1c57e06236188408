"""Service settings."""
RETRIES = 3
TIMEOUT_SECONDS = 12
