"""Operations on apps: schedules declared in code (core/apps.py), deployed as a set."""
