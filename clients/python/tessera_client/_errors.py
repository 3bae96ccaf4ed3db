"""TesseraError: an answer outside 2xx, or no answer at all."""

import json

# What an HTTP status stands for when the body is not the API's own error body
# (src/api/http_errors.cc, StatusCodeFromHttp).
_CODE_OF_STATUS = {
    400: "InvalidArgument",
    401: "Unauthenticated",
    403: "PermissionDenied",
    404: "NotFound",
    408: "Unavailable",
    409: "Aborted",
    412: "FailedPrecondition",
    416: "OutOfRange",
    429: "ResourceExhausted",
    501: "Unimplemented",
    502: "Unavailable",
    503: "Unavailable",
    504: "Unavailable",
}

_MAX_RAW_BODY = 512


class TesseraError(Exception):
    """An error from the controller, or no answer from it.

    Attributes:
        status: the HTTP status (400, 404, 409, 503, ...); None when no controller answered
            (refused connection, timeout, TLS failure), which is reported with code
            "Unavailable".
        code: the API's error code, as in its error body ``{"error": {"code", "message"}}``:
            "InvalidArgument" (400; also 413 and 422 carry the API's own code),
            "Unauthenticated" (401), "PermissionDenied" (403), "NotFound" (404),
            "AlreadyExists", "FailedPrecondition", "Aborted" (409), "ResourceExhausted"
            (429), "Internal" (500), "Unavailable" (503). For a body that is not the API's
            (a proxy's page) the code the HTTP status stands for.
        message: the controller's message ("resources.gpus: must be between 0 and 64, got
            65"), or "HTTP 502: <start of the body>" for a body not its own.
        body: the raw body of the answer (bytes; b"" when there was none).
    """

    def __init__(self, status, code, message, body=b""):
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message
        self.body = body

    def __str__(self):
        where = "HTTP %d" % self.status if self.status is not None else "no answer"
        return "%s (%s, %s)" % (self.message, self.code, where)

    def __repr__(self):
        return "TesseraError(status=%r, code=%r, message=%r)" % (self.status, self.code,
                                                                 self.message)


def code_of_status(status):
    """The API's code an HTTP status stands for (src/api/http_errors.cc)."""
    if status in _CODE_OF_STATUS:
        return _CODE_OF_STATUS[status]
    if 400 <= status < 500:
        return "InvalidArgument"
    return "Internal"


def error_from_answer(status, body):
    """The TesseraError for a non-2xx answer: the API's code and message when the body is
    its error body, else the status's code and the start of the raw body."""
    fallback = code_of_status(status)
    try:
        parsed = json.loads(body.decode("utf-8"))
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        message = message if isinstance(message, str) else ""
        if isinstance(code, str) and code and code != "OK":
            return TesseraError(status, code, message or "HTTP %d" % status, body)
        if message:
            return TesseraError(status, fallback, message, body)
    message = "HTTP %d" % status
    raw = body.decode("utf-8", errors="replace").strip()
    if raw:
        message += ": " + raw[:_MAX_RAW_BODY] + ("..." if len(raw) > _MAX_RAW_BODY else "")
    return TesseraError(status, fallback, message, body)
