"""What every floor above uses: progress lines, the one-line user error, the cache directory."""
