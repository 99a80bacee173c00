"""The roles live in ``common.roles`` (every room reads them); this name stays for old imports."""
from common.roles import (  # noqa: F401
    IsManager,
    IsStaffMember,
    ManagerPathsSerializer,
    ManagerWritesStaffReads,
    Role,
    keep_roles,
    role_flags_sql,
    roles_required,
    user_has_role,
    user_holds_role,
    user_roles,
    writes_need,
)
