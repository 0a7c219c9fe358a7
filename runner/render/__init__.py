"""Showing results: tables that fit a terminal, Markdown, CSV, HTML with charts, workbooks."""
