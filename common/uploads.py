from django.core.files.uploadhandler import FileUploadHandler

from common.errors import ApplicationError


class MaxSizeUploadHandler(FileUploadHandler):
    """Stops reading an upload as soon as it passes ``limit`` bytes (before it fills the disk)."""

    def __init__(self, limit: int, request=None):
        super().__init__(request)
        self.limit = limit
        self.received = 0

    def receive_data_chunk(self, raw_data, start):
        self.received = start + len(raw_data)
        if self.received > self.limit:
            raise ApplicationError(f"the upload passed the limit of {self.limit} bytes",
                                   code="upload_too_large", status_code=413)
        return raw_data

    def file_complete(self, file_size):
        return None
