"""Pre-flight checks: what would waste TPU hours, found on this machine before asking for capacity."""
