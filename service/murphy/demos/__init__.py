"""Demo training programs shipped with murphy (the images of the built-in catalog run them)."""
