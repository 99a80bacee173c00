from rest_framework.pagination import LimitOffsetPagination


def paginate(queryset, serializer_class, request, view):
    """Limit/offset pagination for APIView-based list endpoints."""
    paginator = LimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)
