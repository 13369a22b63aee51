"""Skills: their records, the library on disk, and the pool of coded definitions."""
