import sys
sys.path.insert(0, "src")
import config
print("CHECK OK" if config.TIMEOUT_SECONDS == 45 else f"CHECK BAD {config.TIMEOUT_SECONDS}")
