"""REST API of benchmark construction, one module per subdomain: descriptions, queries, relations
(with mining and completeness), pseudo-label rules and snapshots; ``common`` holds the shared
serializers and the blind-reader mixin."""
