"""Optional integrations of helix_django, each an app a site adds to ``INSTALLED_APPS`` itself."""
