"""A schedule's days: named calendars and the preview of next fire times."""
