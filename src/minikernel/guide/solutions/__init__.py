"""Worked solutions to the exercises of the Triton guide, one module per lesson.

Each solution sits in a snippet section (``# --8<-- [start:exN]``) that the lesson's folded
"Solution" block includes, and each is tested in ``tests/test_guide.py``. Lesson 11 (where to
go from here) has no code exercises.
"""
