"""Job: the dict GET /v1/jobs/{id} answers, with a few helper properties."""

TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


class Job(dict):
    """A job as the API returns it: a plain ``dict`` (``job["spec"]``, ``job["tasks"]``,
    ``json.dumps(job)`` all work) with read-only helpers.

    Keys the controller sends include ``id``, ``name``, ``tenant``, ``queue``, ``state``
    (pending, running, stopping, succeeded, failed, cancelled), ``reason`` (why it is
    pending or how it ended), ``exit_code``, ``submit_time``, ``start_time``,
    ``end_time`` (RFC 3339 strings or None), ``attempts``, ``gpus``, ``replicas``,
    ``tasks`` (each with its node, GPUs, state and exit code) and ``spec``.
    """

    __slots__ = ()

    @property
    def id(self):
        """The job's id: an int, or a string such as "12_3" for an array element."""
        return self.get("id")

    @property
    def name(self):
        return self.get("name", "")

    @property
    def state(self):
        return self.get("state", "")

    @property
    def reason(self):
        return self.get("reason", "")

    @property
    def exit_code(self):
        return self.get("exit_code")

    @property
    def done(self):
        """True once the job has ended: succeeded, failed or cancelled."""
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self):
        return self.state == "succeeded"

    def __repr__(self):
        parts = ["id=%r" % (self.id,), "name=%r" % self.name, "state=%r" % self.state]
        for key in ("tenant", "queue", "gpus"):
            if self.get(key) not in (None, ""):
                parts.append("%s=%r" % (key, self[key]))
        if self.done and self.exit_code is not None:
            parts.append("exit_code=%r" % self.exit_code)
        if self.reason and self.state != "running":
            parts.append("reason=%r" % self.reason)
        return "Job(%s)" % ", ".join(parts)

    # IPython shows the short form too, not the whole dict.
    def _repr_pretty_(self, printer, cycle):
        printer.text(repr(self))
