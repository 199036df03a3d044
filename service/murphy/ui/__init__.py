"""The dashboard's data (downsampling, cached tensor statistics, JSON documents) and its static
files and templates. No web framework here: ``murphy.api.ui_routes`` and ``murphy.api.ui_pages``
serve them on the API's app."""
