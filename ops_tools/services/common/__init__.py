"""The service platform: what every public service of the network shares (docs/services.md)."""
