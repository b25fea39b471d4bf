# The course's build hooks live in the `course` package (course/mkdocs_hooks.py); mkdocs loads this file.
from course.mkdocs_hooks import on_page_markdown, on_post_page, on_pre_build, on_shutdown  # noqa: F401
