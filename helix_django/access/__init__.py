"""Who may do what: session ownership and the host's DRF policy, shared by every surface.

- :mod:`.ownership`: who owns a session (a user, or an anonymous visitor's owner token) and
  the owner-scoped lookups (another owner's session is answered like an unknown one);
- :mod:`.policy`: the authentication, permission, throttle and pagination classes of helix's
  routes (the host's ``REST_FRAMEWORK`` defaults unless ``HELIX`` names others).

Both the REST views (:mod:`helix_django.api`) and the streaming routes and WebSocket
(:mod:`helix_django.transport`) use them; neither imports the other for access rules.
"""
