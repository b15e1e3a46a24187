"""The package version, in one place (pyproject reads it too)."""

__version__ = "0.2.0.dev0"  # semantic versioning; tags v<version>; CHANGELOG.md
