"""HTTP views: parse, delegate to services, render. No engine imports (import-linter)."""
