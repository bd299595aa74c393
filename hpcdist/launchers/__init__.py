"""The launchers: one module each (to be filled by the refactor)."""
