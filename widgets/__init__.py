"""jaxlab.widgets: live views drawn in the browser (anywidget)."""
