"""Jobs: register and change a job's definition, read it back (one, or a page's),
delete, restore, trigger, its kept versions, backfill and resume over a pause, names as
handles, and declarative puts."""
