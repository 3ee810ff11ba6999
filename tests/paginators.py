"""A paginator for the tests of the list endpoints' pagination (``HELIX["PAGINATION_CLASS"]``)."""

from rest_framework.pagination import PageNumberPagination


class PagesOfThree(PageNumberPagination):
    """``PageNumberPagination`` with three items a page (no ``PAGE_SIZE`` needed)."""

    page_size = 3
