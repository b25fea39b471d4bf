# The course's build hooks live in the `course` package (course/mkdocs_hooks.py); mkdocs loads this file.
from course.mkdocs_hooks import (  # noqa: F401
    on_page_content, on_page_markdown, on_post_page, on_pre_build, on_shutdown)
