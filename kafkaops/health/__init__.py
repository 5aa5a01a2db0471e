"""Topic-health post-check: metadata checks against a baseline snapshot and the Spark data scan."""
