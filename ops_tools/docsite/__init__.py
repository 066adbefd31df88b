"""The docs reference site: the release store, generated pages and the MkDocs build.

Uses ``chainspec`` (and ``chain``) only; the CLI (``ops-tools docs``) and ``roles/docs`` call it.
"""
