from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler

from common.errors import ApplicationError


class MaxSizeUploadHandler(FileUploadHandler):
    """Stops reading an upload as soon as it passes ``TRAJLAB_MAX_UPLOAD_BYTES`` (before it fills
    the disk). Installed first in ``FILE_UPLOAD_HANDLERS``, so it also guards bodies parsed early,
    e.g. by the CSRF check of a session-authenticated request."""

    def __init__(self, request=None):
        super().__init__(request)
        self.limit = settings.TRAJLAB_MAX_UPLOAD_BYTES

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > self.limit:
            raise ApplicationError(f"the upload passed the limit of {self.limit} bytes",
                                   code="upload_too_large", status_code=413)
        return raw_data

    def file_complete(self, file_size):
        return None
