"""jaxlab's own warning category (tests turn it into an error)."""


class JaxlabWarning(UserWarning):
    """Something jaxlab did differently from what was asked, and says so."""
