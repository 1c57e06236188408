echo 'checking 42 migrations'
echo 'error: migration 0042 is not applied' >&2
exit 3
